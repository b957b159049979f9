/**
 * A dashboard tab dragged with a real mouse (not
 * `shell.add(..., 'split-right')`) splits the main area; its Bokeh frame
 * must not swallow the drag.
 */
import { expect, test } from './fixtures';

import { fakeCluster, fakeServer, openSidebar } from './fakes';

test('a dashboard tab dragged with the mouse splits the main area', async ({
  page
}) => {
  // Given a Launcher and a cluster's dashboard tab beside it (its frame shows whatever the proxy answers)
  await fakeServer(page, [
    fakeCluster('d', {
      name: 'Drag one',
      dashboard_url: '/clustermgr/dashboard/d/status'
    })
  ]);
  await page.goto();
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('launcher:create')
  );
  const sidebar = await openSidebar(page);
  await sidebar
    .locator('.cm-ClusterCard[data-cluster-id="d"]')
    .getByRole('button', { name: 'Open the dashboard of Drag one' })
    .click();
  const tab = page.locator('#jp-main-dock-panel .lm-TabBar-tab', {
    hasText: 'Dask Drag one'
  });
  await expect(tab).toBeVisible();
  await expect(page.locator('.cm-DashboardView-frame')).toBeVisible();
  const tabBars = page.locator('#jp-main-dock-panel > .lm-DockPanel-tabBar');
  await expect(tabBars).toHaveCount(1);

  // When its tab is dragged with the mouse, across the frame, to the main area's right edge, and released
  const from = (await tab.boundingBox())!;
  const area = (await page.locator('#jp-main-dock-panel').boundingBox())!;
  await page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
  await page.mouse.down();
  await page.mouse.move(from.x + from.width / 2 + 30, from.y + 60, {
    steps: 5
  });
  await page.mouse.move(area.x + area.width - 15, area.y + area.height / 2, {
    steps: 20
  });
  await page.mouse.up();

  // Then the drop happened: the main area is split in two, and no drag is left hanging
  await expect(tabBars).toHaveCount(2);
  await expect(page.locator('body')).not.toHaveClass(/lm-mod-override-cursor/);
});
