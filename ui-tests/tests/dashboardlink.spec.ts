/**
 * The dashboard link of a notebook's Client goes through this server's
 * proxy: the Client widget's link is a path of this server, and following it
 * opens the cluster's dashboard (not http://127.0.0.1:<port>/status, which a
 * remote browser cannot reach).
 */
import { expect, test } from './fixtures';

import {
  createCluster,
  removeCluster,
  smallCluster,
  waitForCluster
} from './helpers';

const NAME = 'dashboardlink-test';

test('the Client widget’s dashboard link opens the cluster’s dashboard through the server', async ({
  page
}) => {
  test.setTimeout(240000);
  // Given a running cluster and a notebook connected to it
  const { id } = await createCluster(page, smallCluster(NAME));
  try {
    const cluster = await waitForCluster(page, id);
    await page.notebook.createNew('dashboardlink.ipynb', {
      kernel: 'python3'
    });
    await page.notebook.setCell(
      0,
      'code',
      `import clustermgr_lab\nclient = clustermgr_lab.connect(${JSON.stringify(cluster.id)})\nclient`
    );
    // When the cell shows the Client widget
    expect(await page.notebook.runCell(0)).toBe(true);
    const output = page.locator('.jp-Cell').first().locator('.jp-OutputArea');
    const link = output.locator('a[href*="status"]').first();
    await expect(link).toBeVisible({ timeout: 60000 });

    // Then its dashboard link is a path of this server, not the scheduler's own address
    const href = await link.getAttribute('href');
    expect(href).toMatch(/^\/clustermgr\/dashboard-at\/[^/]+\/\d+\/status$/);

    // And following it opens that cluster's dashboard, through the keyed proxy URL
    const [popup] = await Promise.all([
      page.waitForEvent('popup'),
      link.click()
    ]);
    await popup.waitForLoadState('domcontentloaded');
    expect(new URL(popup.url()).pathname).toBe(cluster.dashboard_url);
    await expect(popup).toHaveTitle(/Dask/, { timeout: 30000 });
    await popup.close();
  } finally {
    await removeCluster(page, id);
  }
});
