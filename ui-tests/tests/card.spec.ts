/**
 * The cluster card against a fake server: what it shows (status, address,
 * workers, resources, adaptive state, last decision, workers chart), its
 * actions (copy, dashboard tab, shut down with confirmation), its context
 * menu and keyboard use, the palette command, the disconnected state and a
 * missing server extension.
 */
import { expect, test } from './fixtures';

import {
  errorToasts,
  fakeCluster,
  fakeServer,
  fromPalette,
  GiB,
  openSidebar,
  TEMPLATES
} from './fakes';
import { clientCellText } from './helpers';

test.use({ autoGoto: false });

const adaptive = fakeCluster('a', {
  name: 'Adaptive one',
  template: 'local-adaptive',
  dashboard_url: '/clustermgr/dashboard/a/status',
  workers: {
    requested: 3,
    running: 2,
    pending: 1,
    stopping: 0,
    groups: [{ name: 'default', requested: 3, running: 2, pending: 1 }]
  },
  resources: { cores: 2, memory: 4 * GiB, gpus: 0 },
  status: 'scaling',
  adapt: {
    interval: 1,
    wait_count: 3,
    target_duration: 5,
    groups: [{ group: 'default', minimum: 0, maximum: 4, unit: 'workers' }]
  },
  last_decision: {
    time: '2026-01-01T12:00:00+00:00',
    kind: 'scale',
    message: '12 tasks queued, 5 s target duration',
    group: 'default',
    before: 2,
    after: 3,
    source: 'adaptive'
  }
});

test('shows status, workers, resources and adaptive state; follows changes', async ({
  page
}) => {
  const server = await fakeServer(page, [adaptive]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');
  await expect(card.locator('.cm-StatusBadge')).toHaveText('scaling');
  await expect(card.locator('.cm-ClusterCard-address')).toHaveText(
    'tcp://127.0.0.1:1'
  );
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '2 running, 1 pending'
  );
  await expect(card.locator('.cm-ClusterCard-cores')).toHaveText('2 cores');
  await expect(card.locator('.cm-ClusterCard-memory')).toHaveText('4 GiB');
  await expect(card.locator('.cm-ClusterCard-gpus')).toHaveText('0 GPUs');
  await expect(card.locator('.cm-ClusterCard-adapt')).toHaveText(
    'on · default 0–4 workers'
  );
  await expect(card.locator('.cm-ClusterCard-decisionChange')).toHaveText(
    '2 → 3 workers (default)'
  );
  await expect(card.locator('.cm-ClusterCard-decisionReason')).toHaveText(
    '12 tasks queued, 5 s target duration'
  );
  await expect(card.locator('.cm-ClusterCard-decisionMeta')).toContainText(
    'adaptive'
  );
  const chart = card.getByRole('img', { name: /^Workers over the last/ });
  await expect(chart).toHaveAttribute(
    'aria-label',
    /now 2 running of 3 requested/
  );

  server.send({
    type: 'changed',
    cluster: {
      ...adaptive,
      status: 'running',
      workers: { ...adaptive.workers, running: 3, pending: 0 },
      resources: { cores: 3, memory: 6 * GiB, gpus: 0 },
      adapt: null,
      last_decision: {
        ...adaptive.last_decision,
        message: 'manual scale',
        source: 'manual'
      }
    }
  });
  await expect(card.locator('.cm-StatusBadge')).toHaveText('running');
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '3 running, 0 pending'
  );
  await expect(card.locator('.cm-ClusterCard-adapt')).toHaveText('off');
  await expect(card.locator('.cm-ClusterCard-decisionReason')).toHaveText(
    'manual scale'
  );
  await expect(chart).toHaveAttribute(
    'aria-label',
    /now 3 running of 3 requested, at most 3/
  );
  // Two points: the chart steps from 2 to 3.
  await expect(card.locator('.cm-Sparkline-running')).toHaveAttribute(
    'd',
    /^M[\d.]+,[\d.]+H[\d.]+V[\d.]+H[\d.]+$/
  );
  expect(server.listCalls).toBe(0);
});

test('copy, dashboard tab, shut down with confirmation', async ({ page }) => {
  const server = await fakeServer(page, [adaptive], route =>
    route.fulfill({ status: 202, json: { ...adaptive, status: 'stopping' } })
  );
  await page.route(/\/clustermgr\/dashboard\/a\/status$/, route =>
    route.fulfill({
      contentType: 'text/html',
      body: '<h1>Dask dashboard a</h1>'
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');

  await card
    .getByRole('button', { name: 'Copy the scheduler address of Adaptive one' })
    .click();
  await expect(page.locator('.jp-toast-message')).toContainText([
    'Copied tcp://127.0.0.1:1'
  ]);

  await card
    .getByRole('button', { name: 'Open the dashboard of Adaptive one' })
    .click();
  const tab = page.getByRole('tab', { name: 'Dask Adaptive one' });
  await expect(tab).toBeVisible();
  const frame = page.frameLocator('#clustermgr-dashboard-a iframe');
  await expect(frame.locator('h1')).toHaveText('Dask dashboard a');

  await card.getByRole('button', { name: 'Shut down Adaptive one' }).click();
  const confirm = page.locator('.jp-Dialog');
  await expect(confirm.locator('.jp-Dialog-header')).toHaveText(
    'Shut down Adaptive one?'
  );
  await confirm.getByRole('button', { name: 'Cancel' }).click();
  expect(server.calls).toEqual([]);
  await card.getByRole('button', { name: 'Shut down Adaptive one' }).click();
  await confirm.getByRole('button', { name: 'Shut down' }).click();
  await expect
    .poll(() => server.calls.map(c => `${c.method} ${c.path}`))
    .toEqual(['DELETE /clustermgr/api/clusters/a']);
  server.send({
    type: 'changed',
    cluster: { ...adaptive, status: 'stopping' }
  });
  await expect(
    card.getByRole('button', { name: 'Shut down Adaptive one' })
  ).toBeDisabled();
  server.send({ type: 'removed', id: 'a' });
  await expect(card).toHaveCount(0);
});

test('a cluster that shut itself down for being idle is removed from its card', async ({
  page
}) => {
  const idle = fakeCluster('i', {
    name: 'Idle one',
    status: 'stopped',
    dashboard_url: null,
    idle_timeout: 1800
  });
  const server = await fakeServer(page, [idle], route =>
    route.fulfill({ status: 202, json: { ...idle, status: 'stopping' } })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="i"]');
  await expect(card.locator('.cm-StatusBadge')).toHaveText('stopped');
  await expect(
    card.getByRole('button', { name: 'Scale Idle one' })
  ).toHaveCount(0);
  const remove = card.getByRole('button', { name: 'Remove Idle one' });
  await expect(remove).toHaveText('Remove');
  await remove.click();
  await page
    .locator('.jp-Dialog')
    .getByRole('button', { name: 'Remove' })
    .click();
  await expect
    .poll(() => server.calls.map(c => `${c.method} ${c.path}`))
    .toEqual(['DELETE /clustermgr/api/clusters/i']);
});

test('context menu and keyboard', async ({ page }) => {
  const server = await fakeServer(page, [adaptive]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');

  await card.click({ button: 'right', position: { x: 20, y: 10 } });
  const menu = page.locator('.lm-Menu');
  await expect(menu.locator('.lm-Menu-itemLabel')).toContainText([
    'Insert Client Cell for Adaptive one',
    'Open Dashboard',
    'Copy Scheduler Address',
    'Scale…',
    'Adaptive Mode…',
    'Edit Worker Spec…',
    'Event History',
    'Shut Down…'
  ]);
  await page.keyboard.press('Escape');

  // Keyboard only: tab to the card, open its context menu, pick an item.
  await card.focus();
  await expect(card).toBeFocused();
  await page.keyboard.press('Shift+F10');
  await expect(menu).toBeVisible();
  await menu.getByText('Shut Down…').click();
  await expect(page.locator('.jp-Dialog-header')).toHaveText(
    'Shut down Adaptive one?'
  );
  await page.keyboard.press('Escape');
  expect(server.calls).toEqual([]);
});

test('Insert Client cell for cluster… from the palette', async ({ page }) => {
  const other = fakeCluster('b', {
    name: 'Other',
    scheduler_address: 'tcp://127.0.0.1:2'
  });
  await fakeServer(page, [adaptive, other]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await page.notebook.createNew('palette.ipynb');
  // A card's context menu names its cluster; the palette entry still asks.
  await sidebar
    .locator('.cm-ClusterCard[data-cluster-id="a"]')
    .click({ button: 'right', position: { x: 20, y: 10 } });
  await expect(page.locator('.lm-Menu .lm-Menu-itemLabel').first()).toHaveText(
    'Insert Client Cell for Adaptive one'
  );
  await page.keyboard.press('Escape');

  // The modal palette closes when the new notebook takes the focus: retried.
  await fromPalette(
    page,
    'Insert Client Cell for Cluster',
    'Insert Client Cell for Cluster…'
  );
  const chooser = page.locator('.jp-Dialog');
  await expect(chooser.locator('.jp-Dialog-header')).toHaveText(
    'Insert Client cell for cluster'
  );
  await expect(chooser.locator('select option')).toHaveText([
    'Adaptive one (tcp://127.0.0.1:1)',
    'Other (tcp://127.0.0.1:2)'
  ]);
  await chooser.locator('select').selectOption('Other (tcp://127.0.0.1:2)');
  await chooser.getByRole('button', { name: 'OK' }).click();
  await expect
    .poll(() =>
      page.evaluate(() => {
        const panel = (window as any).jupyterapp.shell.currentWidget;
        return panel.content.model.sharedModel.cells.map((c: any) =>
          c.getSource()
        );
      })
    )
    .toContain(clientCellText({ name: 'Other' }));
});

test('shows when live updates are disconnected', async ({ page }) => {
  const server = await fakeServer(page, [adaptive]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live');
  await expect(sidebar.locator('.cm-ClusterPanel-offline')).toHaveCount(0);
  server.down = true;
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline');
  await expect(sidebar.locator('.cm-ClusterPanel-offline')).toContainText(
    'Live updates are disconnected; reconnecting…'
  );
  // The list stays (one GET per reconnection attempt, no polling).
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(1);
  await expect(sidebar).toHaveScreenshot('sidebar-offline.png', {
    maxDiffPixelRatio: 0.02,
    mask: [sidebar.locator('.cm-Sparkline')]
  });
  server.down = false;
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: 15000
  });
});

test('says how to enable a missing server extension', async ({ page }) => {
  await page.route(TEMPLATES, route =>
    route.fulfill({
      status: 404,
      contentType: 'text/html',
      body: '<h1>404 Not Found</h1>'
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const message = sidebar.locator('.cm-ServerMissing');
  await expect(message).toContainText(
    'The clustermgr_lab server extension is not enabled'
  );
  await expect(message.locator('pre')).toHaveText(
    'jupyter server extension enable clustermgr_lab'
  );
  await expect(message).toContainText('and restart JupyterLab.');
  await expect(
    sidebar.getByRole('button', { name: 'New Cluster' })
  ).toBeDisabled();
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(0);
  await expect(sidebar).toHaveScreenshot('sidebar-server-missing.png', {
    maxDiffPixelRatio: 0.02
  });
  expect(await errorToasts(page).count()).toBe(0);
});

test('a refused shut down is a notification with the server message', async ({
  page
}) => {
  await fakeServer(page, [adaptive], route =>
    route.fulfill({
      status: 409,
      json: { code: 'conflict', message: 'cluster a is already stopping' }
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');
  await card.getByRole('button', { name: 'Shut down Adaptive one' }).click();
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept').click();
  await expect(errorToasts(page)).toContainText([
    'Could not shut down Adaptive one: cluster a is already stopping'
  ]);
  await expect(card).toBeVisible();
});
