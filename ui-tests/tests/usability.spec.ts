/**
 * What a new user meets in the sidebar, against a fake server: many clusters
 * stay readable, editors explain and warn, adaptive mode says how to release
 * data and shows its history, stopped and gone clusters are explained, the
 * sidebar is reachable from the keyboard and the palette, Client code goes
 * into consoles and files, and counts read as English.
 */
import { expect, test } from './fixtures';

import {
  CPU_AND_GPU_SPEC,
  errorToasts,
  fakeCluster,
  fakeServer,
  fromPalette,
  GiB,
  openSidebar
} from './fakes';
import { clientCellText } from './helpers';

test.use({ autoGoto: false });

const EVENTS = /\/clustermgr\/api\/clusters\/([^/?]+)\/events(\?.*)?$/;

/**
 * A cluster of two groups: 2 CPU workers (2 threads, 4 GiB) and 1 GPU worker
 * (4 threads, 16 GiB, 1 pending).
 */
function twoGroups(id: string, overrides: Record<string, unknown> = {}) {
  return fakeCluster(id, {
    name: `Two groups ${id}`,
    template: 'gpu',
    spec: CPU_AND_GPU_SPEC,
    workers: {
      requested: 3,
      running: 2,
      pending: 1,
      stopping: 0,
      groups: [
        { name: 'cpu', requested: 2, running: 2, pending: 0 },
        { name: 'gpu', requested: 1, running: 0, pending: 1 }
      ]
    },
    resources: { cores: 4, memory: 8 * GiB, gpus: 0 },
    ...overrides
  });
}

test('many clusters: filter, compact cards, full names, whole ports, group counts, no sideways scroll', async ({
  page
}) => {
  const longName = 'A cluster with a name far too long for any sidebar';
  const clusters = [
    twoGroups('g', {
      name: longName,
      scheduler_address: 'tcp://a-very-long-host-name.compute.example.org:38786'
    }),
    ...['one', 'two', 'three', 'four', 'five'].map(n =>
      fakeCluster(n, { name: `Cluster ${n}`, template: 'local' })
    )
  ];
  await fakeServer(page, clusters);
  await page.goto();
  const sidebar = await openSidebar(page);
  await page.sidebar.setWidth(250, 'left');
  const cards = sidebar.locator('.cm-ClusterCard');
  await expect(cards).toHaveCount(6);

  // Full name on hover; the port stays whole and inside the card.
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="g"]');
  await expect(card.locator('.cm-ClusterCard-name')).toHaveAttribute(
    'title',
    longName
  );
  const address = card.locator('.cm-ClusterCard-address');
  await expect(address).toHaveAttribute(
    'title',
    'tcp://a-very-long-host-name.compute.example.org:38786'
  );
  await expect(address.locator('.cm-ClusterCard-addressPort')).toHaveText(
    ':38786'
  );
  // One line of text (what a copy gets), the port right after the host.
  expect(await address.innerText()).toBe(
    'tcp://a-very-long-host-name.compute.example.org:38786'
  );
  const port = (await address
    .locator('.cm-ClusterCard-addressPort')
    .boundingBox())!;
  const box = (await card.boundingBox())!;
  expect(port.width).toBeGreaterThan(10);
  expect(port.x + port.width).toBeLessThanOrEqual(box.x + box.width);

  // No horizontal scrollbar.
  const overflow = await sidebar.evaluate(
    node => node.scrollWidth - node.clientWidth
  );
  expect(overflow).toBeLessThanOrEqual(0);

  // Per-group counts.
  await expect(card.locator('.cm-ClusterCard-groups')).toHaveText(
    'cpu 2/2 · gpu 0/1 (1 pending)'
  );

  // Compact: no chart, few buttons, short cards; "More…" opens every action.
  await expect(sidebar.locator('.cm-Sparkline')).toHaveCount(0);
  const one = sidebar.locator('.cm-ClusterCard[data-cluster-id="one"]');
  const small = (await one.boundingBox())!;
  expect(small.height).toBeLessThan(150); // header, address, numbers, buttons, Workers
  // And the Workers list stays within reach on a compact card
  await expect(
    one.getByRole('button', { name: 'Workers of Cluster one' })
  ).toBeVisible();
  await one
    .getByRole('button', { name: 'More actions for Cluster one' })
    .click();
  await expect(page.locator('.lm-Menu .lm-Menu-itemLabel')).toContainText([
    'Shut Down…'
  ]);
  await page.keyboard.press('Escape');

  // The filter box.
  const filter = sidebar.getByRole('searchbox', { name: 'Filter clusters' });
  await filter.fill('gpu');
  await expect(cards).toHaveCount(1);
  await expect(sidebar.locator('.cm-ClusterFilter-count')).toHaveText('1 of 6');
  // Every word must match (name, template, status or address).
  await filter.fill('cluster th');
  await expect(cards.locator('.cm-ClusterCard-name')).toHaveText([
    longName,
    'Cluster three'
  ]);
  await filter.fill('');
  await expect(cards).toHaveCount(6);
});

test('editors: units convert, input explains itself, limits warn, one error shown once', async ({
  page
}) => {
  const server = await fakeServer(
    page,
    [twoGroups('e')],
    (route, method, body) =>
      route.fulfill({
        status: 400,
        json: body.spec
          ? {
              code: 'invalid',
              field: 'spec.groups[1].resources.foo',
              message:
                'spec.groups[1].resources.foo: must be a positive number, not -2'
            }
          : {
              code: 'invalid',
              field: 'scale.workers',
              message:
                'scale.workers: 3 workers needs more than the backend allows'
            }
      })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  // Few clusters: no filter box.
  await expect(sidebar.locator('.cm-ClusterFilter')).toHaveCount(0);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="e"]');
  await card.getByRole('button', { name: 'Scale Two groups e' }).click();
  const dialog = page.locator('.cm-FormDialog');
  const amount = dialog.getByLabel('Scale to');
  const unit = dialog.getByLabel('Unit');
  const preview = dialog.locator('.cm-ScaleEditor-preview');
  await expect(amount).toHaveValue('2');
  await expect(preview).toHaveText('→ 2 workers · 4 cores · 8 GiB');

  // Switching unit converts the amount.
  await unit.selectOption('cores');
  await expect(amount).toHaveValue('4');
  await unit.selectOption('memory');
  await expect(amount).toHaveValue('8 GiB');
  await expect(preview).toHaveText('→ 2 workers · 4 cores · 8 GiB');

  // A bare number is not silently bytes; nonsense explains itself.
  await amount.fill('8');
  await expect(preview).toHaveText('8 what? Add a unit: 8 GiB, 8 MiB, 8 TB…');
  await expect(amount).toHaveAttribute('aria-invalid', 'true');
  await amount.fill('lots');
  await expect(preview).toHaveText(
    '“lots” is not a size; use e.g. 512 MiB, 4 GiB or 1 TB'
  );

  // "-1": a true message, and nothing is sent.
  await unit.selectOption('workers');
  await amount.fill('-1');
  await expect(preview).toHaveText(
    'Cannot be negative: enter 0 or more workers'
  );
  await dialog.getByRole('button', { name: 'Scale', exact: true }).click();
  await expect(dialog).toBeVisible();
  expect(server.calls).toEqual([]);

  // Above the server's limit (8 workers) and this machine (16 cores).
  await amount.fill('8');
  await expect(preview.locator('.cm-Preview-warning')).toHaveText([
    'Above the limit of 8 workers per cluster: the server will refuse it',
    'More than this machine’s 16 cores: workers will compete for them'
  ]);

  // The server's refusal: once, next to the field, without its path.
  await amount.fill('3');
  await dialog.getByRole('button', { name: 'Scale', exact: true }).click();
  const message = dialog.locator('#cm-scale-amount-error');
  await expect(message).toHaveText(
    '3 workers needs more than the backend allows'
  );
  await expect(
    dialog.getByText('needs more than the backend allows')
  ).toHaveCount(1);
  await expect(dialog.getByText('scale.workers')).toHaveCount(0);
  expect(await errorToasts(page).count()).toBe(0);
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();

  // Adaptive mode: switching unit converts both ends of the range.
  await card
    .getByRole('button', { name: 'Adaptive mode of Two groups e' })
    .click();
  const cpu = dialog.locator('.cm-AdaptRange[data-group="cpu"]');
  await cpu.locator('.cm-AdaptRange-on').check();
  await expect(cpu.locator('.cm-AdaptRange-maximum input')).toHaveValue('4');
  await cpu.locator('.cm-AdaptRange-unit select').selectOption('cores');
  await expect(cpu.locator('.cm-AdaptRange-maximum input')).toHaveValue('8');
  await cpu.locator('.cm-AdaptRange-unit select').selectOption('memory');
  await expect(cpu.locator('.cm-AdaptRange-minimum input')).toHaveValue('0');
  await expect(cpu.locator('.cm-AdaptRange-maximum input')).toHaveValue(
    '16 GiB'
  );
  await expect(cpu.locator('.cm-AdaptRange-preview')).toHaveText(
    '→ 0–4 workers · 0–8 cores · 0 B–16 GiB'
  );
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();

  // The Worker Spec editor: a bare memory number explains itself; the total warns.
  await card
    .getByRole('button', { name: 'Edit the Worker Spec of Two groups e' })
    .click();
  // The dialog focuses its first field first.
  await expect(dialog.getByLabel('Group name, group 1')).toBeFocused();
  await dialog.getByLabel('Memory per worker, e.g. 4 GiB, group 1').fill('4');
  await expect(dialog.locator('#cm-spec-g0-memory-error')).toHaveText(
    '4 what? Add a unit: 4 GiB, 4 MiB, 4 TB…'
  );
  await dialog
    .getByLabel('Memory per worker, e.g. 4 GiB, group 1')
    .fill('40 GiB');
  await expect(
    dialog.locator('.cm-SpecEditor-total .cm-Preview-warning')
  ).toHaveText([
    'More than this machine’s 64 GiB of memory: workers may be killed'
  ]);
  // A refusal about no input of the form: the field in the form's words.
  await dialog.getByRole('button', { name: 'Apply' }).click();
  await expect(dialog.locator('.cm-FieldError')).toHaveText([
    'Resource foo of group gpu: must be a positive number, not -2'
  ]);
  await expect(dialog.getByText('spec.groups')).toHaveCount(0);
  expect(await errorToasts(page).count()).toBe(0);
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();
});

test('adaptive: how to release data a client holds, and the event history', async ({
  page
}) => {
  const blocked = fakeCluster('h', {
    name: 'Held',
    adapt: {
      interval: 1,
      wait_count: 3,
      target_duration: 5,
      groups: [{ group: 'default', minimum: 0, maximum: 4, unit: 'workers' }]
    },
    last_decision: {
      time: '2026-01-01T12:00:05+00:00',
      kind: 'note',
      message: 'cannot shrink: workers hold data a client still references',
      group: 'default',
      before: null,
      after: null,
      source: 'adaptive'
    }
  });
  await fakeServer(page, [blocked]);
  await page.route(EVENTS, route =>
    route.fulfill({
      json: {
        events: [
          {
            time: '2026-01-01T12:00:00+00:00',
            kind: 'lifecycle',
            message: 'running',
            group: null,
            before: null,
            after: null,
            source: 'system'
          },
          {
            time: '2026-01-01T12:00:02+00:00',
            kind: 'scale',
            message: '12 tasks queued, 5 s target duration',
            group: 'default',
            before: 0,
            after: 2,
            source: 'adaptive'
          },
          blocked.last_decision
        ]
      }
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="h"]');
  await expect(card.locator('.cm-ShrinkHint')).toContainText(
    'client.cancel(futures)'
  );
  await expect(card.locator('.cm-ShrinkHint')).toContainText('del');

  await card.getByRole('button', { name: 'Event history of Held' }).click();
  await expect(page.getByRole('tab', { name: 'History Held' })).toBeVisible();
  const rows = page.locator(
    '#clustermgr-events-h .cm-EventHistory-table tbody tr'
  );
  await expect(rows).toHaveCount(3);
  // Newest first.
  await expect(rows.locator('.cm-EventHistory-message')).toHaveText([
    'cannot shrink: workers hold data a client still references',
    '12 tasks queued, 5 s target duration',
    'running'
  ]);
  await expect(rows.nth(1)).toContainText('0 → 2');
});

test('a stopped card has no live buttons; clusters gone while offline are explained', async ({
  page
}) => {
  const clusters = [
    fakeCluster('a', { name: 'Alive' }),
    fakeCluster('b', { name: 'Bygone' }),
    fakeCluster('s', {
      name: 'Stopped one',
      status: 'stopped',
      scheduler_address: null
    })
  ];
  // Tall enough to see three full cards at once
  await page.setViewportSize({ width: 1280, height: 1400 });
  const server = await fakeServer(page, clusters);
  await page.goto();
  const sidebar = await openSidebar(page);
  const stopped = sidebar.locator('.cm-ClusterCard[data-cluster-id="s"]');
  await expect(stopped.locator('.cm-StatusBadge')).toHaveText('stopped');
  // History, Restart and Remove (a cluster that shut itself down stays listed until removed): nothing that needs a scheduler
  await expect(stopped.getByRole('button')).toHaveText([
    'History',
    'Logs',
    'Restart',
    'Remove'
  ]);
  await expect(stopped).not.toContainText('Stopping');
  // An ended cluster's scheduler is not coming: no "yet"
  await expect(stopped.locator('.cm-ClusterCard-address')).toHaveText(
    'no scheduler'
  );

  // The server goes away; while it is gone, "Bygone" stops.
  server.down = true;
  clusters.splice(1, 1);
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline');
  server.down = false;
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: 15000
  });
  const notice = sidebar.locator('.cm-GoneNotice');
  await expect(notice).toContainText(
    'While the connection to the server was down, 1 cluster stopped: Bygone.'
  );
  await expect(notice).toContainText(
    'the server restarted and could not take them back'
  );
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(2);
  await notice.getByRole('button', { name: 'Dismiss' }).click();
  await expect(notice).toHaveCount(0);
});

test('offline cards disable what needs the server', async ({ page }) => {
  const server = await fakeServer(page, [fakeCluster('a', { name: 'Alive' })]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');
  await expect(card.getByRole('button', { name: 'Scale Alive' })).toBeEnabled();
  server.down = true;
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(
    card.getByRole('button', { name: 'Scale Alive' })
  ).toBeDisabled();
  await expect(
    card.getByRole('button', { name: 'Shut down Alive' })
  ).toBeDisabled();
});

test('keyboard and palette: "dask" finds the commands, Show Clusters Sidebar focuses it', async ({
  page
}) => {
  await fakeServer(page, [fakeCluster('a', { name: 'Alive' })]);
  await page.goto();
  const palette = page.locator('#command-palette');
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute(
      'apputils:activate-command-palette'
    )
  );
  await palette.locator('input').fill('dask');
  for (const label of [
    'New Cluster…',
    'Show Clusters Sidebar',
    'Insert Client Cell for Cluster…'
  ]) {
    await expect(
      palette.locator('.lm-CommandPalette-item', { hasText: label })
    ).toHaveCount(1);
  }
  await page.keyboard.press('Escape');

  await fromPalette(page, 'dask show', 'Show Clusters Sidebar');
  await expect
    .poll(() =>
      page.evaluate(
        () => !!document.activeElement?.closest('#clustermgr-sidebar')
      )
    )
    .toBe(true);
  await expect(
    page.locator('#clustermgr-sidebar .cm-ClusterCard').first()
  ).toBeFocused();
});

test('dragging a card selects no text; Client code goes into notebooks, files and consoles', async ({
  page
}) => {
  const code = clientCellText({ name: 'Alive' });
  await fakeServer(page, [fakeCluster('a', { name: 'Alive' })]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');

  // Drag from the card's (selectable) address across the page onto a cell.
  await page.notebook.createNew('drag.ipynb', { kernel: null });
  const from = (await card.locator('.cm-ClusterCard-address').boundingBox())!;
  const to = (await page
    .locator('.jp-NotebookPanel .jp-Cell')
    .first()
    .boundingBox())!;
  await page.mouse.move(from.x + 10, from.y + 5);
  await page.mouse.down();
  await page.mouse.move(from.x + 40, from.y + 30, { steps: 5 });
  await page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, {
    steps: 15
  });
  expect(
    await page.evaluate(() => window.getSelection()?.toString() ?? '')
  ).toBe('');
  await page.mouse.up();
  await expect
    .poll(() =>
      page.evaluate(() => {
        const panel = (window as any).jupyterapp.shell.currentWidget;
        return panel.content.model.sharedModel.cells.map((c: any) =>
          c.getSource()
        );
      })
    )
    .toEqual([code]); // dropped on the empty first cell: the code went into it
  expect(
    await page.evaluate(() => window.getSelection()?.toString() ?? '')
  ).toBe('');

  // Dropped again on that cell, which is no longer empty: a new cell
  await page.mouse.move(from.x + 10, from.y + 5);
  await page.mouse.down();
  await page.mouse.move(from.x + 40, from.y + 30, { steps: 5 });
  await page.mouse.move(to.x + to.width / 2, to.y + 10, { steps: 15 });
  await page.mouse.up();
  await expect
    .poll(() =>
      page.evaluate(() => {
        const panel = (window as any).jupyterapp.shell.currentWidget;
        return panel.content.model.sharedModel.cells.map((c: any) =>
          c.getSource()
        );
      })
    )
    .toEqual([code, code]);

  // A file editor: dropped on it, the code goes in at the cursor.
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('fileeditor:create-new')
  );
  const fileEditor = page.locator('.jp-FileEditor');
  await expect(fileEditor).toBeVisible();
  const start = (await card.locator('.cm-ClusterCard-name').boundingBox())!;
  const file = (await fileEditor.boundingBox())!;
  await page.mouse.move(start.x + 5, start.y + 5);
  await page.mouse.down();
  await page.mouse.move(start.x + 40, start.y + 30, { steps: 5 });
  await page.mouse.move(file.x + 100, file.y + 40, { steps: 15 });
  await page.mouse.up();
  await expect
    .poll(() =>
      page.evaluate(() => {
        const widget = (window as any).jupyterapp.shell.currentWidget;
        return widget.content.model.sharedModel.getSource();
      })
    )
    .toContain(code);

  // A console: the card's button writes into its prompt.
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('console:create', {
      kernelPreference: { shouldStart: false, canStart: false }
    })
  );
  await expect(page.locator('.jp-CodeConsole-promptCell')).toBeVisible({
    timeout: 60000
  });
  await card
    .getByRole('button', { name: 'Insert client code for Alive' })
    .click();
  await expect
    .poll(() =>
      page.evaluate(() => {
        const panel = (window as any).jupyterapp.shell.currentWidget;
        return panel.console.promptCell?.model.sharedModel.getSource();
      })
    )
    .toBe(code);
});

test('plurals and sizes read the same everywhere', async ({ page }) => {
  const one = fakeCluster('o', {
    name: 'Single',
    spec: {
      groups: [
        {
          name: 'default',
          count: 1,
          threads: 1,
          memory: GiB,
          gpus: 1,
          resources: {}
        }
      ]
    },
    resources: { cores: 1, memory: GiB, gpus: 1 },
    last_decision: {
      time: '2026-01-01T12:00:00+00:00',
      kind: 'scale',
      message: 'manual scale',
      group: 'default',
      before: 0,
      after: 1,
      source: 'manual'
    }
  });
  await fakeServer(page, [one, twoGroups('t')]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="o"]');
  await expect(card.locator('.cm-ClusterCard-resources')).toHaveText(
    '1 core · 1 GiB · 1 GPU'
  );
  await expect(card.locator('.cm-ClusterCard-decisionChange')).toHaveText(
    '0 → 1 worker (default)'
  );
  await expect(
    sidebar.locator(
      '.cm-ClusterCard[data-cluster-id="t"] .cm-ClusterCard-resources'
    )
  ).toHaveText('4 cores · 8 GiB · 0 GPUs');

  await card.getByRole('button', { name: 'Scale Single' }).click();
  await expect(page.locator('.cm-ScaleEditor-preview')).toHaveText(
    '→ 1 worker · 1 core · 1 GiB · 1 GPU'
  );
  await page.locator('.jp-Dialog-button.jp-mod-reject').click();

  // An adaptive range of one size reads as that size, not "1–1 workers"
  await card.getByRole('button', { name: 'Adaptive mode of Single' }).click();
  const range = page.locator('.cm-AdaptRange[data-group="default"]');
  await range.locator('.cm-AdaptRange-on').check();
  await range.locator('.cm-AdaptRange-minimum input').fill('1');
  await range.locator('.cm-AdaptRange-maximum input').fill('1');
  await expect(range.locator('.cm-AdaptRange-preview')).toHaveText(
    '→ 1 worker · 1 core · 1 GiB'
  );
  await page.locator('.jp-Dialog-button.jp-mod-reject').click();

  await card.getByRole('button', { name: 'Shut down Single' }).click();
  await expect(page.locator('.jp-Dialog-body')).toHaveText(
    'Its scheduler and 1 worker stop, and clients connected to it lose their data.'
  );
  await page.keyboard.press('Escape');
});
