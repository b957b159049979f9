/**
 * Every card action at every card size and sidebar width (issue 41, point
 * 1): two real clusters keep full cards at 1400×900 and in a 250 px
 * sidebar (compact only when asked, or above four clusters); a compact
 * card keeps its Plots, and its More… menu and context menu hold every
 * action, "Open Dashboard Plot…" included; the palette opens a plot by
 * name, asking which cluster.
 */
import { expect, IJupyterLabPageFixture, test } from './fixtures';
import type { Locator } from '@playwright/test';

import { fromPalette, openSidebar } from './fakes';
import {
  createCluster,
  docsScreenshot,
  removeCluster,
  smallCluster,
  waitForCluster
} from './helpers';

const NAMES = ['every-action-one', 'every-action-two'];

/**
 * The labels of the context menu open now.
 */
async function menuLabels(page: IJupyterLabPageFixture): Promise<string[]> {
  const menu = page.locator('.lm-Menu').last();
  await expect(menu).toBeVisible();
  return menu.locator('.lm-Menu-itemLabel').allTextContents();
}

/**
 * Pick `plot` in the "Open a dashboard plot" dialog, and wait for its tab.
 */
async function pickPlot(
  page: IJupyterLabPageFixture,
  plot: string,
  cluster: string
): Promise<void> {
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog.locator('.jp-Dialog-header')).toHaveText(
    `Open a dashboard plot of ${cluster}`
  );
  await dialog.locator('select').selectOption(plot);
  await dialog.getByRole('button', { name: 'OK' }).click();
  await expect(
    page.getByRole('tab', { name: `${plot} · ${cluster}` })
  ).toBeVisible();
}

/**
 * Whether each of these buttons is shown whole inside its card.
 */
async function shownWhole(buttons: Locator): Promise<boolean[]> {
  return buttons.evaluateAll(nodes =>
    nodes.map(node => {
      const box = node.getBoundingClientRect();
      const card = node.closest('.cm-ClusterCard')!.getBoundingClientRect();
      return (
        box.width > 0 &&
        box.height > 0 &&
        box.left >= card.left - 1 &&
        box.right <= card.right + 1
      );
    })
  );
}

test('two clusters keep every action at 1400×900 and at 250 px; a compact card and the palette open plots by name', async ({
  page
}) => {
  test.setTimeout(300000);
  // Given two running clusters, at 1400×900
  await page.setViewportSize({ width: 1400, height: 900 });
  const ids: string[] = [];
  try {
    for (const name of NAMES) {
      ids.push((await createCluster(page, smallCluster(name))).id);
    }
    for (const id of ids) {
      await waitForCluster(page, id);
    }
    const sidebar = await openSidebar(page);
    const list = sidebar.locator('.cm-ClusterList');
    const cards = sidebar.locator('.cm-ClusterCard');
    await expect(cards).toHaveCount(2);
    const plotsButtons = sidebar.getByRole('button', {
      name: /^Dashboard plots of /
    });

    // Then the cards are full (two full cards need not fit the height: the
    // sidebar scrolls), each with its Plots and Logs
    await expect(list).not.toHaveClass(/cm-mod-compact/);
    await expect(plotsButtons).toHaveCount(2);
    await expect(sidebar.locator('.cm-LogsButton')).toHaveCount(2);
    expect(await shownWhole(plotsButtons)).toEqual([true, true]);

    // When, no card being selected, a plot is opened by name from the palette
    await fromPalette(
      page,
      'Open Dashboard Plot: Workers Memory',
      'Open Dashboard Plot: Workers Memory'
    );
    // Then it asks which cluster, and opens that cluster's plot
    const chooser = page.locator('.jp-Dialog');
    await expect(chooser.locator('.jp-Dialog-header')).toHaveText(
      'Open a dashboard plot of which cluster?'
    );
    const options = await chooser.locator('option').allTextContents();
    const second = options.find(o => o.startsWith(NAMES[1]))!;
    await chooser.locator('select').selectOption(second);
    await chooser.getByRole('button', { name: 'OK' }).click();
    await expect(
      page.getByRole('tab', { name: `Workers Memory · ${NAMES[1]}` })
    ).toBeVisible();

    // When the window is short, nothing changes under the pointer
    await page.setViewportSize({ width: 1400, height: 500 });
    await expect(list).not.toHaveClass(/cm-mod-compact/);
    await page.setViewportSize({ width: 1400, height: 900 });

    // When the sidebar is at JupyterLab's narrowest (250 px)
    await page.sidebar.setWidth(250, 'left');
    // Then the cards stay full, every button inside its card
    await expect(list).not.toHaveClass(/cm-mod-compact/);
    expect(
      await shownWhole(sidebar.locator('.cm-ClusterCard .jp-Button'))
    ).not.toContain(false);
    // And names wrap between words only, whole in their tooltip
    for (const [i, name] of NAMES.entries()) {
      const shown = cards.nth(i).locator('.cm-ClusterCard-name');
      await expect(shown).toHaveAttribute('title', name);
      const lines = await shown.evaluate(node => {
        const range = document.createRange();
        range.selectNodeContents(node);
        return Array.from(range.getClientRects()).length;
      });
      expect(lines).toBeLessThanOrEqual(2);
    }

    // When the user asks for compact cards (the header's toggle)
    await sidebar.getByRole('button', { name: 'Compact cards' }).click();
    await expect(list).toHaveClass(/cm-mod-compact/);
    await expect(
      sidebar.getByRole('button', { name: 'Compact cards' })
    ).toHaveAttribute('aria-pressed', 'true');
    // Then a compact card still shows Plots, and More…
    expect(await shownWhole(plotsButtons)).toEqual([true, true]);
    await sidebar.screenshot({
      path: docsScreenshot(test.info(), 'compact-cards.png')
    });
    const first = cards.nth(0);
    await first.getByRole('button', { name: /^More actions for / }).click();
    // And More… lists every action, Open Dashboard Plot… included
    const labels = await menuLabels(page);
    for (const label of [
      `Insert Client Cell for ${NAMES[0]}`,
      'Open Dashboard',
      'Open Dashboard Plot…',
      'Copy Scheduler Address',
      'Event History',
      'Logs'
    ]) {
      expect(labels).toContain(label);
    }
    expect(labels.some(l => /^Scale/.test(l))).toBe(true);
    expect(labels.some(l => /^Shut Down/i.test(l))).toBe(true);

    // When Open Dashboard Plot… is chosen from More…
    await page
      .locator('.lm-Menu .lm-Menu-item', { hasText: 'Open Dashboard Plot…' })
      .click();
    // Then the plot picked opens in a tab of its own, for that card's cluster
    await pickPlot(page, 'Task Stream', NAMES[0]);

    // When the second compact card's context menu is used
    await cards
      .nth(1)
      .locator('.cm-ClusterCard-name')
      .click({ button: 'right' });
    await page
      .locator('.lm-Menu .lm-Menu-item', { hasText: 'Open Dashboard Plot…' })
      .click();
    await pickPlot(page, 'Progress', NAMES[1]);

    // And the choice is kept as the compactCards setting
    expect(
      await page.evaluate(async () => {
        const settings = await (
          window as any
        ).jupyterapp.serviceManager.settings.fetch('clustermgr-lab:plugin');
        return settings.raw;
      })
    ).toMatch(/"compactCards":\s*true/);

    // And full cards again when the user asks
    await sidebar.getByRole('button', { name: 'Compact cards' }).click();
    await expect(sidebar.locator('.cm-ClusterList')).not.toHaveClass(
      /cm-mod-compact/
    );
  } finally {
    // The compactCards setting goes back to its default for the next specs.
    await page.evaluate(() =>
      (window as any).jupyterapp.serviceManager.settings.save(
        'clustermgr-lab:plugin',
        '{}'
      )
    );
    for (const id of ids) {
      await removeCluster(page, id);
    }
  }
});
