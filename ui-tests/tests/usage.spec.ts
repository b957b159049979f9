/**
 * A real cluster's card shows what it has used (core-seconds, then minutes
 * and hours, running on with the clock) and a chart of workers, memory and
 * CPU in use served by the server: hovering (or the arrow keys) reads out a
 * point, and a reload gets the same chart back.
 */
import { expect, test } from './fixtures';

import { openSidebar } from './fakes';
import {
  CLUSTER_TIMEOUT,
  createCluster,
  removeCluster,
  smallCluster,
  waitForCluster
} from './helpers';

/**
 * "12 core-seconds", "1.5 core-minutes", "2.0 core-hours".
 */
const USAGE = /^([\d.]+) core-(seconds|minutes|hours)$/;

/**
 * The seconds a core-usage text stands for (to the precision it shows).
 */
function coreSeconds(text: string | null): number {
  const match = USAGE.exec(text ?? '');
  if (!match) {
    throw new Error(`not a core usage: ${JSON.stringify(text)}`);
  }
  const unit = { seconds: 1, minutes: 60, hours: 3600 }[match[2]]!;
  return Number(match[1]) * unit;
}

test('usage and the chart of workers, memory and CPU, with a readout', async ({
  page
}) => {
  test.setTimeout(300000);
  const { id } = await createCluster(page, smallCluster('usage-test'));
  try {
    await waitForCluster(page, id);
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);

    // What it used: core-seconds of its one worker, running on with the clock
    // (read in seconds whatever the unit: a slow start may cross a minute)
    const used = card.locator('.cm-ClusterCard-coreUsage');
    await expect(used).toHaveText(USAGE, { timeout: CLUSTER_TIMEOUT });
    const first = coreSeconds(await used.textContent());
    await expect
      .poll(async () => coreSeconds(await used.textContent()), {
        timeout: 30000
      })
      .toBeGreaterThan(first);
    // Memory use reads in GiB-hours once there is some: never KiB- or MiB-hours
    await expect(card.locator('.cm-ClusterCard-usage')).not.toContainText(
      /(KiB|MiB)-hours/
    );

    // The chart of the server's timeline (several points once sampled)
    const plot = card.locator('.cm-ClusterChart-plot');
    const readout = card.locator('.cm-ClusterChart-readout');
    await expect(plot).toBeVisible({ timeout: CLUSTER_TIMEOUT });
    await expect(readout).toHaveText(
      /^now \S+ · [\d.]+ workers? · .+ of .+ memory · [\d.]+ cores busy$/
    );
    await expect
      .poll(async () => Number(await readout.getAttribute('data-point')), {
        timeout: 30000
      })
      .toBeGreaterThan(0);

    // Hovering the left edge reads out the first point; leaving, the last.
    // The plot's place is taken at each try: cards above it may still move
    // (a card of an earlier test leaving the list).
    const cursor = card.locator('.cm-ClusterChart-cursor');
    await expect(async () => {
      const box = (await plot.boundingBox())!;
      await plot.hover({ position: { x: 1, y: box.height / 2 } });
      await expect(readout).toHaveAttribute('data-point', '0', {
        timeout: 2000
      });
    }).toPass({ timeout: 30000 });
    await expect(readout).toHaveText(/^\d\d:\d\d:\d\d · [\d.]+ workers? · /);
    await expect(cursor).toHaveCount(1);
    await page.mouse.move(0, 0);
    await expect(readout).toHaveText(/^now /);
    await expect(cursor).toHaveCount(0);

    // The keyboard moves along the points too: one back from now, then on
    await plot.focus();
    await page.keyboard.press('ArrowLeft');
    await expect(cursor).toHaveCount(1);
    const back = Number(await readout.getAttribute('data-point'));
    await page.keyboard.press('ArrowRight');
    await expect(readout).toHaveAttribute('data-point', String(back + 1));
    await plot.blur();
    await expect(readout).toHaveText(/^now /);
    await expect(cursor).toHaveCount(0);

    // A reload gets the chart back from the server, from the cluster's start
    const points = Number(await readout.getAttribute('data-point'));
    await page.reload({ waitForIsReady: false }); // the restored layout has no Launcher to wait for
    await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
    const tab = page.getByRole('tab', { name: 'Clusters' });
    await expect(tab).toBeVisible({ timeout: 30000 });
    if ((await tab.getAttribute('aria-selected')) !== 'true') {
      await tab.click();
    }
    const again = page.locator(
      `#clustermgr-sidebar .cm-ClusterCard[data-cluster-id="${id}"] .cm-ClusterChart-readout`
    );
    await expect(again).toHaveText(/^now /, { timeout: CLUSTER_TIMEOUT });
    expect(Number(await again.getAttribute('data-point'))).toBeGreaterThan(
      points - 1
    );
  } finally {
    await removeCluster(page, id);
  }
});
