/**
 * A cluster's History tab in a narrow panel (a split of a 1400×900 window,
 * the width of JupyterLab's narrowest sidebar) keeps every column readable:
 * nothing is cut off, nothing runs past the panel's edge.
 */
import { expect, test } from './fixtures';

import { fakeCluster, fakeServer, openSidebar } from './fakes';

const EVENTS = /\/clustermgr\/api\/clusters\/h\/events(\?.*)?$/;

/**
 * What a real cluster's History holds after a few hours: long addresses, a
 * departure with its cause, adaptive notes, a group with a long name.
 */
function events(): Array<Record<string, unknown>> {
  const at = (minute: number) =>
    new Date(Date.UTC(2026, 0, 1, 12, minute, 5)).toISOString();
  return [
    {
      time: at(0),
      kind: 'lifecycle',
      message:
        'scheduler running at tls://127.0.0.1:39211, dashboard at https://127.0.0.1:40135/status',
      group: null,
      before: null,
      after: null,
      source: 'system'
    },
    {
      time: at(1),
      kind: 'scale',
      message: 'adaptive: 12 tasks waiting for a thread',
      group: 'high-memory-workers',
      before: 0,
      after: 12,
      source: 'adaptive'
    },
    {
      time: at(2),
      kind: 'lifecycle',
      message:
        'worker high-memory-workers-3 went away: the nanny restarted it after it passed its memory limit of 4 GiB',
      group: 'high-memory-workers',
      before: null,
      after: null,
      source: 'system',
      cause: {
        kind: 'memory-limit',
        worker: 'high-memory-workers-3',
        group: 'high-memory-workers',
        detail: 'nanny memory limit 4 GiB'
      }
    },
    {
      time: at(3),
      kind: 'note',
      message:
        'cannot shrink: workers hold data a client still references (client.unpublish_dataset(name) releases it)',
      group: 'high-memory-workers',
      before: null,
      after: null,
      source: 'adaptive'
    }
  ];
}

test('History in a narrow split keeps every column readable', async ({
  page
}) => {
  // Given a 1400×900 window and a cluster with a History of long entries
  await page.setViewportSize({ width: 1400, height: 900 });
  await fakeServer(page, [fakeCluster('h', { name: 'Histories' })]);
  await page.route(EVENTS, route =>
    route.fulfill({ json: { events: events() } })
  );
  await page.goto();
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('launcher:create')
  );
  const sidebar = await openSidebar(page);
  await sidebar
    .locator('.cm-ClusterCard[data-cluster-id="h"]')
    .getByRole('button', { name: 'Event history of Histories' })
    .click();
  const history = page.locator('.cm-EventHistory');
  await expect(history.locator('tbody tr')).toHaveCount(4);

  // When it is put beside the Launcher and its split narrowed to 250 px
  await page.evaluate(() => {
    const app = (window as any).jupyterapp;
    const widget = Array.from(app.shell.widgets('main') as any[]).find(
      (w: any) => w.id === 'clustermgr-events-h'
    );
    app.shell.add(widget, 'main', { mode: 'split-right' });
  });
  const handle = page.locator(
    '#jp-main-dock-panel > .lm-DockPanel-handle:not(.lm-mod-hidden)'
  );
  await expect(handle).toHaveCount(1);
  const box = (await handle.boundingBox())!;
  const area = (await page.locator('#jp-main-dock-panel').boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(area.x + area.width - 250, box.y + box.height / 2, {
    steps: 10
  });
  await page.mouse.up();
  await expect
    .poll(async () => (await history.boundingBox())!.width)
    .toBeLessThan(270);

  // Then no cell is cut off and nothing runs past the panel's right edge
  const clipped = await history.evaluate(panel => {
    const edge = panel.getBoundingClientRect().right + 0.5;
    const cells = Array.from(
      panel.querySelectorAll<HTMLElement>('.cm-EventHistory-table th, td')
    );
    return [
      ...(panel.scrollWidth > panel.clientWidth + 1
        ? [
            `panel scrolls sideways: ${panel.scrollWidth} > ${panel.clientWidth}`
          ]
        : []),
      ...cells
        .filter(
          cell =>
            cell.getClientRects().length > 0 &&
            (cell.scrollWidth > cell.clientWidth + 1 ||
              cell.getBoundingClientRect().right > edge)
        )
        .map(cell => `cut: ${cell.textContent}`)
    ];
  });
  expect(clipped).toEqual([]);
  // And each entry still says when, what, which group, by whom, and why
  const departure = history.locator('tbody tr').nth(1);
  await expect(departure).toContainText('memory-limit');
  await expect(departure).toContainText('high-memory-workers');
  await expect(departure).toContainText('system');
  await expect(departure).toContainText('passed its memory limit of 4 GiB');
});
