/**
 * JupyterLab's conventions and dask-labextension's settings: every cluster
 * action in the command palette acting on the selected card, the card's
 * context menu, a Clusters main menu and shortcuts declared in the settings
 * schema (and changeable there), a status-bar item kept up to date, and the
 * hideClusterManager, defaultLayout and defaultURL settings.
 */
import { expect, galata, IJupyterLabPageFixture, test } from './fixtures';

import { fakeCluster, fakeServer, fromPalette, openSidebar } from './fakes';

const PLUGIN = 'clustermgr-lab:plugin';

/**
 * Change one of the extension's settings through JupyterLab's settings
 * registry, as the Settings editor does.
 */
async function setSetting(
  page: IJupyterLabPageFixture,
  key: string,
  value: unknown
): Promise<void> {
  await page.evaluate(
    async ({ plugin, key, value }) => {
      const registry = await (window as any).galata.getPlugin(
        '@jupyterlab/apputils-extension:settings'
      );
      await registry.set(plugin, key, value);
    },
    { plugin: PLUGIN, key, value }
  );
}

const one = fakeCluster('a', {
  name: 'First',
  dashboard_url: '/clustermgr/dashboard/a/status'
});
const two = fakeCluster('b', {
  name: 'Second',
  scheduler_address: 'tcp://127.0.0.1:2'
});

test('every cluster action is in the palette and acts on the selected card', async ({
  page
}) => {
  // Given two clusters, the second one selected in the sidebar
  const server = await fakeServer(page, [one, two]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const second = sidebar.locator('.cm-ClusterCard[data-cluster-id="b"]');
  await second.click({ position: { x: 20, y: 10 } });
  await expect(second).toHaveClass(/cm-mod-selected/);

  // Then the palette lists every action under "Dask Clusters"
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute(
      'apputils:activate-command-palette'
    )
  );
  const palette = page.locator('#command-palette');
  await expect(
    palette.locator('.lm-CommandPalette-header', { hasText: 'Dask Clusters' })
  ).toHaveCount(1);
  const items = await palette
    .locator('.lm-CommandPalette-item')
    .allTextContents();
  for (const label of [
    'Scale…',
    'Adaptive Mode…',
    'Shut Down…',
    'Open Dashboard',
    'Logs',
    'Insert Client Cell for',
    'Event History',
    'Copy Scheduler Address',
    'New Cluster…',
    'Attach Cluster…'
  ]) {
    expect(items.some(text => text.includes(label))).toBe(true);
  }
  await page.keyboard.press('Escape');

  // When Shut Down… is run from the palette
  await fromPalette(page, 'Shut Down', 'Shut Down…');

  // Then it asks about the selected cluster, not the first one
  await expect(page.locator('.jp-Dialog-header')).toHaveText(
    'Shut down Second?'
  );
  await page
    .locator('.jp-Dialog')
    .getByRole('button', { name: 'Shut down' })
    .click();
  await expect
    .poll(() => server.calls.map(c => `${c.method} ${c.path}`))
    .toEqual(['DELETE /clustermgr/api/clusters/b']);
});

test('with no card selected, a palette action asks which cluster', async ({
  page
}) => {
  await fakeServer(page, [one, two]);
  await page.goto();
  await openSidebar(page);

  await fromPalette(page, 'Logs', 'Logs');

  const chooser = page.locator('.jp-Dialog');
  await expect(chooser.locator('.jp-Dialog-header')).toHaveText(
    'Choose a cluster'
  );
  await chooser.locator('select').selectOption('Second (tcp://127.0.0.1:2)');
  await chooser.getByRole('button', { name: 'OK' }).click();
  await expect(page.getByRole('tab', { name: 'Logs Second' })).toBeVisible();
});

test('the context menu, main menu and shortcuts come from the settings schema', async ({
  page
}) => {
  const server = await fakeServer(page, [one, two]);
  await page.goto();
  const sidebar = await openSidebar(page);

  // The schema declares them, so the Settings editor can change them
  const schema = await page.evaluate(async plugin => {
    const registry = await (window as any).galata.getPlugin(
      '@jupyterlab/apputils-extension:settings'
    );
    const settings = await registry.load(plugin);
    return settings.schema;
  }, PLUGIN);
  expect(
    schema['jupyter.lab.menus'].context.map((item: any) => item.selector)
  ).toContain('.cm-ClusterCard');
  expect(schema['jupyter.lab.menus'].main[0].id).toBe('jp-mainmenu-clusters');
  expect(schema['jupyter.lab.shortcuts'].map((s: any) => s.command)).toContain(
    'clustermgr:show-sidebar'
  );

  // The main menu's Clusters entry runs the actions
  await page.menu.clickMenuItem('Clusters>Attach Cluster…');
  await expect(page.locator('.jp-Dialog-header')).toHaveText(
    'Attach a cluster started elsewhere'
  );
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-reject').click();
  await expect(page.locator('.jp-Dialog')).toHaveCount(0);

  // A shortcut on a focused card acts on that card: S scales it
  const second = sidebar.locator('.cm-ClusterCard[data-cluster-id="b"]');
  await second.focus();
  await page.keyboard.press('s');
  await expect(page.locator('.jp-Dialog-header')).toContainText('Second');
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-reject').click();
  await expect(page.locator('.jp-Dialog')).toHaveCount(0);

  // Show Clusters Sidebar has a shortcut: the sidebar hides, then comes back
  await page.getByRole('tab', { name: 'Clusters' }).click();
  await expect(sidebar).toBeHidden();
  await page.keyboard.press('Control+Shift+Y');
  await expect(sidebar).toBeVisible();
  expect(server.calls).toEqual([]);
});

test('the status bar counts clusters and workers, and follows changes', async ({
  page
}) => {
  // Given a cluster running one worker
  const server = await fakeServer(page, [one]);
  await page.goto();
  const item = page.locator('.cm-StatusItem');
  await expect(item).toHaveText('1 cluster · 1 worker');

  // When a second cluster with 3 workers appears on the stream
  server.send({
    type: 'added',
    cluster: fakeCluster('c', {
      name: 'Third',
      workers: { ...one.workers, requested: 3, running: 3 }
    })
  });

  // Then the item says so, and a click shows the sidebar
  await expect(item).toHaveText('2 clusters · 4 workers');
  await item.locator('[role="button"]').click();
  await expect(page.locator('#clustermgr-sidebar')).toBeVisible();
});

test.describe('dask-labextension settings', () => {
  test.use({
    mockSettings: {
      ...galata.DEFAULT_SETTINGS,
      [PLUGIN]: {
        defaultLayout: {
          'individual-task-stream': { mode: 'split-right', ref: null },
          'individual-progress': {
            mode: 'split-bottom',
            ref: 'individual-task-stream'
          }
        }
      }
    }
  });

  test('defaultURL attaches its cluster; defaultLayout opens plots with the dashboard', async ({
    page
  }) => {
    await page.route(
      /\/clustermgr\/dashboard\/a\/individual-plots\.json/,
      route =>
        route.fulfill({
          json: {
            'Individual Task Stream': '/individual-task-stream',
            'Individual Progress': '/individual-progress',
            'Individual Workers Memory': '/individual-workers-memory'
          }
        })
    );
    const server = await fakeServer(page, [one]);
    await page.goto();
    await expect(page.locator('.cm-StatusItem')).toHaveText(
      '1 cluster · 1 worker'
    );

    // defaultURL: the cluster at that address is attached (it is not listed)
    await setSetting(page, 'defaultURL', 'tcp://127.0.0.1:4242');
    await expect
      .poll(() => server.calls.map(c => [c.method, c.body]))
      .toEqual([['POST', { attach: 'tcp://127.0.0.1:4242' }]]);
    // ... and the Attach dialog starts with it
    await page.evaluate(() => {
      // Resolves once the dialog closes: not awaited here.
      void (window as any).jupyterapp.commands.execute(
        'clustermgr:attach-cluster'
      );
    });
    await expect(page.locator('.jp-Dialog input').first()).toHaveValue(
      'tcp://127.0.0.1:4242'
    );
    await page.keyboard.press('Escape');

    // defaultLayout: Open Dashboard opens the dashboard and the two plots,
    // the task stream to the right of the dashboard, progress below it
    await page.evaluate(() =>
      (window as any).jupyterapp.commands.execute('clustermgr:open-dashboard', {
        clusterId: 'a'
      })
    );
    await expect(
      page.locator('#clustermgr-plot-a-individual-progress')
    ).toBeVisible();
    const box = async (id: string) =>
      (await page.locator(`#${id}`).boundingBox())!;
    const dashboard = await box('clustermgr-dashboard-a');
    const stream = await box('clustermgr-plot-a-individual-task-stream');
    const progress = await box('clustermgr-plot-a-individual-progress');
    expect(stream.x).toBeGreaterThan(dashboard.x + dashboard.width - 5);
    expect(progress.y).toBeGreaterThan(stream.y + stream.height - 5);
    expect(
      page.locator('#clustermgr-plot-a-individual-workers-memory')
    ).toHaveCount(0);
  });
});

test.describe('hideClusterManager', () => {
  test.use({
    mockSettings: {
      ...galata.DEFAULT_SETTINGS,
      [PLUGIN]: { hideClusterManager: true }
    }
  });

  test('hides the sidebar until the setting is turned off', async ({
    page
  }) => {
    await fakeServer(page, [one]);
    await page.goto();
    // Given the setting is on: no Clusters tab, no status-bar item
    await expect(page.locator('#jp-main-statusbar')).toBeVisible();
    await expect(page.getByRole('tab', { name: 'Clusters' })).toHaveCount(0);
    await expect(page.locator('.cm-StatusItem')).toBeHidden();

    // When it is turned off in the settings, both are there
    await setSetting(page, 'hideClusterManager', false);
    await expect(page.getByRole('tab', { name: 'Clusters' })).toBeVisible();
    await expect(page.locator('.cm-StatusItem')).toHaveText(
      '1 cluster · 1 worker'
    );

    // And on again: gone again
    await setSetting(page, 'hideClusterManager', true);
    await expect(page.getByRole('tab', { name: 'Clusters' })).toHaveCount(0);
    await expect(page.locator('.cm-StatusItem')).toBeHidden();
  });
});
