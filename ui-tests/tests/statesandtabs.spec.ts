/**
 * A cluster whose every worker was refused says "refused" (not "running")
 * and its error once; New Cluster and Attach wait while the server is out of
 * reach; History tabs come back after a reload, and tabs of a cluster gone
 * meanwhile keep its name, not its id; cards never turn compact by height,
 * and names wrap between words at 250 px; selects show an arrow; rename and
 * idle timeout from the context menu.
 */
import { expect, test } from './fixtures';

import {
  BATCH_CAPABILITIES,
  fakeCluster,
  fakeServer,
  openSidebar
} from './fakes';

test('a cluster whose every worker was refused is "refused", and says why once', async ({
  page
}) => {
  // Given a SLURM cluster whose scheduler runs and whose only job sbatch refused
  const error =
    'sbatch refused worker default-1: sbatch: error: unable to contact slurm controller (connect failure)';
  await fakeServer(page, [
    fakeCluster('r', {
      name: 'Refused one',
      backend: 'slurm',
      capabilities: BATCH_CAPABILITIES,
      error,
      workers: {
        requested: 0,
        running: 0,
        pending: 0,
        pending_reasons: {},
        waiting: [],
        stopping: 0,
        groups: [
          {
            name: 'default',
            requested: 0,
            running: 0,
            pending: 0,
            pending_reasons: {},
            error
          }
        ]
      },
      resources: { cores: 0, memory: 0, gpus: 0 },
      last_decision: {
        time: new Date().toISOString(),
        kind: 'scale',
        message: `not retrying: ${error}`,
        group: 'default',
        before: 1,
        after: 0,
        source: 'system'
      }
    })
  ]);

  // When the sidebar shows it
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="r"]');

  // Then its state is "refused", not "running"
  await expect(card.locator('.cm-StatusBadge')).toHaveText('refused');
  await expect(card).toHaveAttribute(
    'aria-label',
    'Cluster Refused one, refused'
  );
  // And sbatch's error is said once, the decision only says what was done
  await expect(card.getByRole('alert')).toHaveText(error);
  await expect(card.locator('.cm-ClusterCard-decisionReason')).toHaveText(
    'not retrying'
  );
  const text = await card.innerText();
  expect(text.split('unable to contact slurm controller').length - 1).toBe(1);
});

test('New Cluster and Attach wait while the server is out of reach', async ({
  page
}) => {
  // Given a live sidebar
  const server = await fakeServer(page, [fakeCluster('a', { name: 'Alive' })]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const newCluster = sidebar.getByRole('button', { name: 'New Cluster' });
  const attach = sidebar.getByRole('button', {
    name: 'Attach a cluster started elsewhere'
  });
  await expect(newCluster).toBeEnabled();

  // When the server goes away
  server.down = true;
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline');

  // Then New Cluster and Attach are disabled, and say why
  await expect(newCluster).toBeDisabled();
  await expect(attach).toBeDisabled();
  await expect(newCluster).toHaveAttribute('title', /out of reach/);

  // When it is back, they work again
  server.down = false;
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: 15000
  });
  await expect(newCluster).toBeEnabled();
  await expect(attach).toBeEnabled();
});

test('History tabs are restored after a reload; tabs of a gone cluster keep its name', async ({
  page
}) => {
  // Given a cluster with its History and dashboard tabs open
  const clusters = [
    fakeCluster('g0ne1d', {
      name: 'Soon gone',
      dashboard_url: '/clustermgr/dashboard/g0ne1d/status'
    }),
    fakeCluster('k33p', { name: 'Kept' })
  ];
  await fakeServer(page, clusters);
  let savedLayout = '';
  page.on('request', request => {
    if (
      request.method() === 'PUT' &&
      request.url().includes('/api/workspaces') &&
      request.postData()?.includes('layout-restorer:data')
    ) {
      savedLayout = request.postData() ?? '';
    }
  });
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="g0ne1d"]');
  await card
    .getByRole('button', { name: 'Event history of Soon gone' })
    .click();
  await expect(
    page.getByRole('tab', { name: 'History Soon gone' })
  ).toBeVisible();
  await card
    .getByRole('button', { name: 'Open the dashboard of Soon gone' })
    .click();
  await expect(page.getByRole('tab', { name: 'Dask Soon gone' })).toBeVisible();
  await sidebar
    .locator('.cm-ClusterCard[data-cluster-id="k33p"]')
    .getByRole('button', { name: 'Event history of Kept' })
    .click();
  await expect(page.getByRole('tab', { name: 'History Kept' })).toBeVisible();

  // (once the layout with these tabs is saved)
  await expect
    .poll(() => savedLayout, { timeout: 30000 })
    .toMatch(
      /clustermgr-events:k33p[^]*clustermgr-events:g0ne1d|clustermgr-events:g0ne1d[^]*clustermgr-events:k33p/
    );
  expect(savedLayout).toContain('g0ne1d/status');

  // When the page is reloaded after "Soon gone" went away
  clusters.splice(0, 1);
  await page.reload({ waitForIsReady: false }); // the restored layout has no Launcher to wait for
  await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });

  // Then both History tabs are back, and the gone cluster's tabs bear its name, never its id
  await expect(page.getByRole('tab', { name: 'History Kept' })).toBeVisible({
    timeout: 30000
  });
  await expect(
    page.getByRole('tab', { name: 'History Soon gone' })
  ).toBeVisible();
  await expect(page.getByRole('tab', { name: 'Dask Soon gone' })).toBeVisible();
  await expect(
    page.locator('#jp-main-dock-panel .lm-TabBar-tab', { hasText: 'g0ne1d' })
  ).toHaveCount(0);
  // And the dashboard tab says the cluster is gone, by name
  await page.getByRole('tab', { name: 'Dask Soon gone' }).click();
  await expect(page.locator('.cm-DashboardView-message')).toHaveText(
    /^Cluster Soon gone is gone \(it is no longer listed\)/
  );
});

test('cards stay full whatever the height (compact only when asked or above four), and names wrap between words at 250 px', async ({
  page
}) => {
  // Given three clusters with long names, in a tall window
  await fakeServer(
    page,
    ['adaptive-analysis-one', 'adaptive-analysis-two', 'Untitled-notebook'].map(
      (name, i) => fakeCluster(`c${i}`, { name, template: 'dask-default' })
    )
  );
  await page.setViewportSize({ width: 1400, height: 1400 });
  await page.goto();
  const sidebar = await openSidebar(page);
  const list = sidebar.locator('.cm-ClusterList');
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(3);
  await expect(list).not.toHaveClass(/cm-mod-compact/);

  // When the window is short, and full cards no longer fit
  await page.setViewportSize({ width: 1400, height: 600 });
  // Then they stay full (the sidebar scrolls): nothing switches under the pointer
  await expect(sidebar.locator('.cm-ClusterCard-chart').first()).toBeVisible();
  await expect(list).not.toHaveClass(/cm-mod-compact/);

  // When the sidebar is at JupyterLab's narrowest
  await page.sidebar.setWidth(250, 'left');
  // Then no name or template is broken inside a word: each line ends at a
  // word's end (a space or a hyphen), and the tooltip has it whole
  for (const part of ['.cm-ClusterCard-name', '.cm-ClusterCard-template']) {
    const midWord = await sidebar.locator(part).evaluateAll(nodes =>
      nodes.flatMap(node => {
        const text = node.textContent ?? '';
        const range = document.createRange();
        const lineEnds: number[] = [];
        let top: number | null = null;
        for (let i = 0; i < text.length; i++) {
          range.setStart(node.firstChild!, i);
          range.setEnd(node.firstChild!, i + 1);
          const y = range.getBoundingClientRect().top;
          if (top !== null && y > top + 2) {
            lineEnds.push(i);
          }
          top = y;
        }
        return lineEnds
          .filter(i => !/[\s-]/.test(text[i - 1]) && !/\s/.test(text[i]))
          .map(i => `${text.slice(0, i)}|${text.slice(i)}`);
      })
    );
    expect(midWord).toEqual([]);
  }
  await expect(sidebar.locator('.cm-ClusterCard-name').first()).toHaveAttribute(
    'title',
    'adaptive-analysis-one'
  );
});

test('a page load never flashes Offline: it says Connecting… then Live', async ({
  page
}) => {
  // Given every state the sidebar's header and banner show, recorded from the start
  await page.addInitScript(() => {
    const seen: string[] = ((window as any).cmStates = []);
    new MutationObserver(() => {
      const text = document.querySelector(
        '.cm-ConnectionState-text'
      )?.textContent;
      if (text && seen[seen.length - 1] !== text) {
        seen.push(text);
      }
      if (document.querySelector('.cm-ClusterPanel-offline')) {
        seen.push('banner');
      }
    }).observe(document, {
      subtree: true,
      childList: true,
      characterData: true
    });
  });
  await fakeServer(page, [fakeCluster('l', { name: 'Loaded' })]);
  // When the page loads with the sidebar open
  await page.goto();
  const sidebar = await openSidebar(page);
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live');
  await page.reload();
  await expect(
    page.locator('#clustermgr-sidebar .cm-ConnectionState')
  ).toHaveText('Live');
  // Then it never said Offline, nor showed the reconnecting banner
  const seen = await page.evaluate(() => (window as any).cmStates as string[]);
  expect(seen).toContain('Live');
  expect(seen).not.toContain('Offline');
  expect(seen).not.toContain('banner');
});

test('the unit select of the Scale dialog shows an arrow', async ({ page }) => {
  // Given a cluster's Scale dialog
  await fakeServer(page, [fakeCluster('s', { name: 'Scalable' })]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'Scale Scalable' }).click();
  const wrapper = page.locator('.jp-Dialog .jp-HTMLSelect').first();
  const select = wrapper.locator('select');
  await expect(select).toBeVisible();
  // Then the select (JupyterLab's HTMLSelect) draws its caret inside its right edge, and its text stays clear of it
  const caret = wrapper.locator('svg');
  await expect(caret).toBeVisible();
  const box = (await select.boundingBox())!;
  const caretBox = (await caret.boundingBox())!;
  expect(caretBox.x).toBeGreaterThan(box.x + box.width / 2);
  expect(caretBox.x + caretBox.width).toBeLessThanOrEqual(box.x + box.width);
  const padding = await select.evaluate(
    node => getComputedStyle(node).paddingRight
  );
  expect(parseFloat(padding)).toBeGreaterThanOrEqual(caretBox.width);
});

test('a cluster is renamed and its idle timeout set from its context menu', async ({
  page
}) => {
  // Given a running cluster
  const server = await fakeServer(page, [
    fakeCluster('n', { name: 'Old name' })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="n"]');
  const menu = page.locator('.lm-Menu');
  const dialog = page.locator('.jp-Dialog');
  const patches = () =>
    server.calls.filter(c => c.method === 'PATCH').map(c => c.body);

  // When it is renamed from its context menu
  await card.click({ button: 'right', position: { x: 20, y: 10 } });
  await menu.getByText('Rename…').click();
  await dialog.getByRole('textbox').fill('New name');
  await dialog.getByRole('button', { name: 'Rename' }).click();
  // Then the server is asked for exactly that
  await expect(dialog).toHaveCount(0);
  expect(patches()).toEqual([{ name: 'New name' }]);

  // When an idle timeout that does not read is given
  await card.click({ button: 'right', position: { x: 20, y: 10 } });
  await menu.getByText('Idle Timeout…').click();
  await expect(dialog.getByRole('textbox')).toHaveValue('off');
  await dialog.getByRole('textbox').fill('soon');
  await dialog.getByRole('button', { name: 'Apply' }).click();
  // Then the dialog stays open and says why, and nothing is sent
  await expect(dialog.locator('.cm-FieldError')).toHaveText(
    '"soon" is not a duration: write e.g. 30 min, 2 h or off'
  );
  expect(patches()).toHaveLength(1);
  // When it reads, it is sent in seconds
  await dialog.getByRole('textbox').fill('30 min');
  await dialog.getByRole('button', { name: 'Apply' }).click();
  await expect(dialog).toHaveCount(0);
  expect(patches()).toEqual([{ name: 'New name' }, { idle_timeout: 1800 }]);
});

test('a busy cluster is not told to release data; the hint for held data fits a 250 px card', async ({
  page
}) => {
  const note = (message: string) => ({
    time: new Date().toISOString(),
    kind: 'note',
    message,
    group: 'default',
    before: null,
    after: null,
    source: 'adaptive'
  });
  // Given one cluster busy computing and one whose workers hold a client's data
  await fakeServer(page, [
    fakeCluster('b', {
      name: 'Busy',
      last_decision: note(
        'cannot shrink yet: the cluster is busy (5 tasks running or queued)'
      )
    }),
    fakeCluster('h', {
      name: 'Held',
      last_decision: note(
        'cannot shrink: workers hold data a client still references'
      )
    })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await page.sidebar.setWidth(250, 'left');
  const busy = sidebar.locator('.cm-ClusterCard[data-cluster-id="b"]');
  const held = sidebar.locator('.cm-ClusterCard[data-cluster-id="h"]');

  // Then the busy one says so, with no hint about releasing data
  await expect(busy.locator('.cm-ClusterCard-decisionReason')).toHaveText(
    'cannot shrink yet: the cluster is busy (5 tasks running or queued)'
  );
  await expect(busy.locator('.cm-ShrinkHint')).toHaveCount(0);
  // And the held one's hint is whole inside its card
  const hint = held.locator('.cm-ShrinkHint');
  await expect(hint).toContainText('client.unpublish_dataset(name)');
  const inside = await held.evaluate(card => {
    const edge = card.getBoundingClientRect().right + 0.5;
    const hintNode = card.querySelector('.cm-ShrinkHint')!;
    const parts = [hintNode, ...Array.from(hintNode.querySelectorAll('code'))];
    return (
      hintNode.scrollWidth <= hintNode.clientWidth + 1 &&
      parts.every(n =>
        Array.from(n.getClientRects()).every(r => r.right <= edge)
      )
    );
  });
  expect(inside).toBe(true);
});

test('the Adaptive checkbox is named by its group', async ({ page }) => {
  // Given a cluster's Adaptive mode dialog
  await fakeServer(page, [fakeCluster('a', { name: 'Adaptable' })]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar
    .getByRole('button', { name: 'Adaptive mode of Adaptable' })
    .click();
  // Then a screen reader hears which group's adaptive mode the checkbox turns on
  await expect(
    page
      .locator('.jp-Dialog')
      .getByRole('checkbox', { name: 'Adaptive default' })
  ).toBeVisible();
});

test('New Cluster warns about this machine counting the clusters already running on it', async ({
  page
}) => {
  // Given a local cluster that already uses 15 of this machine’s 16 cores and 62 of its 64 GiB
  await fakeServer(page, [
    fakeCluster('big', {
      name: 'Big one',
      resources: { cores: 15, memory: 62 * 2 ** 30, gpus: 0 }
    })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);

  // When a new local cluster of a few cores is planned
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  await dialog.locator('[data-template="local"] input[type="radio"]').check();

  // Then the warnings count what the running cluster uses
  const warnings = dialog.locator('.cm-SpecEditor-total .cm-Preview-warning');
  await expect(warnings).toHaveText([
    'With the 15 cores another cluster uses here, more than this machine’s 16 cores: workers will compete for them',
    'With the 62 GiB another cluster uses here, more than this machine’s 64 GiB of memory: workers may be killed'
  ]);
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();
});
