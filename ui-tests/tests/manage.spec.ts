/**
 * Managing a real cluster from its card: scale in workers/cores/memory with
 * the preview and the server's resolution, the server's message next to an
 * invalid value, adaptive mode on (range per group) and off, and a new
 * Worker Spec with a second group.
 */
import { expect, test } from './fixtures';

import { errorToasts, openSidebar } from './fakes';
import {
  CLUSTER_TIMEOUT,
  createCluster,
  removeCluster,
  waitForCluster
} from './helpers';

test('scale, adaptive and Worker Spec of a real cluster', async ({ page }) => {
  test.setTimeout(300000);
  const { id } = await createCluster(page, {
    name: 'manage-test',
    template: 'local',
    adapt: null,
    spec: {
      groups: [{ name: 'default', count: 1, threads: 1, memory: '512 MiB' }]
    }
  });
  try {
    await waitForCluster(page, id);
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '1 running, 0 pending'
    );

    // A size that does not read explains itself, and is not sent.
    await card.getByRole('button', { name: 'Scale manage-test' }).click();
    const dialog = page.locator('.cm-FormDialog');
    const amount = dialog.getByLabel('Scale to');
    await amount.fill('lots');
    await dialog.getByLabel('Unit').selectOption('memory');
    await expect(amount).toHaveValue('');
    await amount.fill('lots');
    await expect(dialog.locator('.cm-ScaleEditor-preview')).toHaveText(
      '“lots” is not a size; use e.g. 512 MiB, 4 GiB or 1 TB'
    );
    await expect(amount).toHaveAttribute('aria-invalid', 'true');

    // Above the server's limit: the preview warns; the server's refusal is
    // shown once, next to the field, without its path, and no notification.
    await dialog.getByLabel('Unit').selectOption('workers');
    await amount.fill('40');
    await expect(
      dialog.locator('.cm-ScaleEditor-preview .cm-Preview-warning').first()
    ).toHaveText(/^Above the limit of \d+ workers per cluster/);
    await dialog.getByRole('button', { name: 'Scale', exact: true }).click();
    const message = dialog.locator('#cm-scale-amount-error');
    await expect(message).toContainText('the limit is');
    await expect(message).not.toContainText('scale.workers');
    await expect(amount).toHaveAttribute('aria-invalid', 'true');
    expect(await errorToasts(page).count()).toBe(0);

    // Scale by memory: the preview rounds up to whole workers.
    await dialog.getByLabel('Unit').selectOption('memory');
    await amount.fill('1 GiB');
    await expect(
      dialog.locator('.cm-ScaleEditor-preview .cm-Preview-text')
    ).toHaveText('→ 2 workers · 2 cores · 1 GiB');
    const patched = page.waitForResponse(
      r =>
        r.request().method() === 'PATCH' && r.url().includes(`/clusters/${id}`)
    );
    await dialog.getByRole('button', { name: 'Scale', exact: true }).click();
    const resolved = (await (await patched).json()).resolved;
    expect(resolved).toEqual({
      group: 'default',
      workers: 2,
      cores: 2,
      memory: 2 * 512 * 2 ** 20,
      gpus: 0
    });
    await expect(dialog).toHaveCount(0);
    await expect(page.locator('.jp-toast-message')).toContainText([
      'manage-test: default → 2 workers · 2 cores · 1 GiB'
    ]);
    // pending, then running (the stream says so)
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '2 running, 0 pending',
      {
        timeout: CLUSTER_TIMEOUT
      }
    );
    await expect(card.locator('.cm-ClusterCard-cores')).toHaveText('2 cores');
    await expect(card.locator('.cm-ClusterCard-decisionReason')).toHaveText(
      /manual/
    );

    // Adaptive mode: an invalid range first, then 1–2 workers.
    await card
      .getByRole('button', { name: 'Adaptive mode of manage-test' })
      .click();
    await dialog.locator('.cm-AdaptRange-on').check();
    await dialog.locator('.cm-AdaptRange-minimum input').fill('3');
    await dialog.locator('.cm-AdaptRange-maximum input').fill('1');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await expect(dialog.locator('.cm-FieldError')).toHaveText([
      'Must be at least the minimum'
    ]);
    await expect(dialog.locator('[aria-invalid="true"]')).toHaveCount(1);
    await dialog.locator('.cm-AdaptRange-minimum input').fill('1');
    await dialog.locator('.cm-AdaptRange-maximum input').fill('2');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await expect(dialog).toHaveCount(0);
    await expect(card.locator('.cm-ClusterCard-adapt')).toHaveText(
      'on · default 1–2 workers'
    );
    if (process.env.UPDATE_DOCS_SCREENSHOT) {
      // The README's picture: the real sidebar with this cluster.
      await page.sidebar.setWidth(440, 'left');
      const top = (await sidebar.boundingBox())!;
      const hint = (await sidebar
        .locator('.cm-ClusterPanel-hint')
        .boundingBox())!;
      await page.screenshot({
        path: '../docs/sidebar.png',
        clip: {
          x: top.x,
          y: top.y,
          width: top.width,
          height: hint.y + hint.height + 12 - top.y
        }
      });
    }

    // Off again.
    await card
      .getByRole('button', { name: 'Adaptive mode of manage-test' })
      .click();
    await expect(dialog.locator('.cm-AdaptRange-on')).toBeChecked();
    await expect(dialog.locator('.cm-AdaptRange-maximum input')).toHaveValue(
      '2'
    );
    await dialog.locator('.cm-AdaptRange-on').uncheck();
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await expect(dialog).toHaveCount(0);
    await expect(card.locator('.cm-ClusterCard-adapt')).toHaveText('off');

    // A new Worker Spec: one worker, plus a second group of one 2-thread worker.
    await card
      .getByRole('button', { name: 'Edit the Worker Spec of manage-test' })
      .click();
    await expect(
      dialog.getByLabel('Memory per worker, e.g. 4 GiB, group 1')
    ).toHaveValue('512 MiB');
    await dialog.getByLabel('Number of workers, group 1').fill('1');
    await dialog.getByRole('button', { name: 'Add group' }).click();
    await dialog.getByLabel('Group name, group 2').fill('big');
    await dialog.getByLabel('Threads (cores) per worker, group 2').fill('2');
    await dialog
      .getByLabel('Memory per worker, e.g. 4 GiB, group 2')
      .fill('512 MiB');
    await expect(
      dialog.locator('.cm-SpecEditor-total .cm-Preview-text')
    ).toHaveText('Total → 2 workers · 3 cores · 1 GiB');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await expect(dialog).toHaveCount(0);
    await expect(card.locator('.cm-ClusterCard-cores')).toHaveText('3 cores', {
      timeout: CLUSTER_TIMEOUT
    });
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '2 running, 0 pending'
    );
    await expect(
      card.getByRole('img', {
        name: /^Workers( over the last|, memory and CPU in use)/
      })
    ).toBeVisible();

    // The dashboard, through the server's authenticated proxy, in a tab.
    await card
      .getByRole('button', { name: 'Open the dashboard of manage-test' })
      .click();
    await expect(
      page.getByRole('tab', { name: 'Dask manage-test' })
    ).toBeVisible();
    const frame = page.frameLocator(`#clustermgr-dashboard-${id} iframe`);
    await expect(frame.locator('body')).toContainText(/Dask|Workers|Tasks/i, {
      timeout: 30000
    });
  } finally {
    await removeCluster(page, id);
  }
});
