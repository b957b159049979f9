/**
 * How the card and History word events (issue 41, point 3), from a fake
 * server that sends the fields the real one does: what was asked before
 * what it became, a repeated note once with its count, the warning colour
 * only for level "warning", pending workers with their reason.
 */
import { expect, test } from './fixtures';

import { fakeCluster, fakeServer, GiB, openSidebar } from './fakes';
import { docsScreenshot } from './helpers';

const SCALE = {
  time: '2026-12-05T12:00:00+00:00',
  kind: 'scale',
  message: 'manual scale',
  group: 'default',
  before: 2,
  after: 4,
  source: 'manual',
  asked: '4 GiB',
  count: 1,
  level: 'info'
};

/** A Worker Spec edit that replaced both workers, worded as the server words it. */
const SPEC_EDIT = {
  time: '2026-12-05T11:58:00+00:00',
  kind: 'scale',
  message: 'worker spec edited, 2 workers replaced',
  group: 'default',
  before: 2,
  after: 2,
  source: 'spec',
  asked: 'spec edited: default memory 8 GiB → 1 GiB',
  count: 1,
  level: 'info'
};

const EVENTS = [
  SPEC_EDIT,
  SCALE,
  {
    time: '2026-12-05T12:01:00+00:00',
    kind: 'note',
    message: 'cannot shrink yet: the cluster is busy',
    group: 'default',
    before: null,
    after: null,
    source: 'adaptive',
    count: 3,
    level: 'info'
  },
  {
    time: '2026-12-05T12:02:00+00:00',
    kind: 'note',
    message: 'cannot grow: the server allows at most 8 workers',
    group: 'default',
    before: null,
    after: null,
    source: 'adaptive',
    level: 'warning'
  }
];

test('the card and History say what was asked, count repeated notes, and warn only when told', async ({
  page
}) => {
  // Given a cluster scaled to "4 GiB" (4 workers of 1 GiB), two of them pending for a reason
  const cluster = fakeCluster('w', {
    name: 'Worded',
    last_decision: SCALE,
    workers: {
      requested: 4,
      running: 2,
      pending: 2,
      pending_reasons: { 'starting (manual scale)': 2 },
      waiting: [],
      stopping: 0,
      groups: [
        {
          name: 'default',
          requested: 4,
          running: 2,
          pending: 2,
          pending_reasons: { 'starting (manual scale)': 2 },
          error: null
        }
      ]
    },
    resources: { cores: 2, memory: 2 * GiB, gpus: 0 }
  });
  await fakeServer(page, [cluster]);
  await page.route(/\/clustermgr\/api\/clusters\/w\/events(\?.*)?$/, route =>
    route.fulfill({ json: { events: EVENTS } })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="w"]');

  // Then the card says what was asked, then what it became
  await expect(card.locator('.cm-ClusterCard-decisionChange')).toHaveText(
    '4 GiB → 4 workers × 1 GiB (from 2) (default)'
  );
  // And its pending workers say why they wait
  await expect(card.locator('.cm-ClusterCard-workersPending')).toHaveText(
    '2 pending — starting (manual scale)'
  );

  // When its History is opened
  await card.getByRole('button', { name: 'Event history of Worded' }).click();
  const rows = page.locator('.cm-EventHistory-table tbody tr');
  await expect(rows).toHaveCount(4);
  // Then (newest first) the warning is in the warning colour, the repeated
  // note is one line with its count, in the ordinary colour
  const warning = rows.nth(0);
  const repeated = rows.nth(1);
  await expect(warning).toHaveAttribute('data-level', 'warning');
  await expect(repeated).toHaveAttribute('data-level', 'info');
  await expect(repeated.locator('.cm-EventHistory-message')).toHaveText(
    'cannot shrink yet: the cluster is busy ×3'
  );
  const colour = (row: typeof warning) =>
    row
      .locator('.cm-EventHistory-message')
      .evaluate(node => getComputedStyle(node).color);
  expect(await colour(warning)).not.toBe(await colour(repeated));
  expect(await colour(repeated)).toBe(await colour(rows.nth(2)));
  // And the scale says what was asked before what it became
  await expect(rows.nth(2).locator('td[data-label="workers"]')).toHaveText(
    '4 GiB → 4 workers × 1 GiB (from 2)'
  );
  // And the spec edit says what changed, and that its workers were replaced
  await expect(rows.nth(3).locator('td[data-label="workers"]')).toHaveText(
    'spec edited: default memory 8 GiB → 1 GiB → 2 workers × 1 GiB'
  );
  await expect(rows.nth(3).locator('.cm-EventHistory-message')).toHaveText(
    'worker spec edited, 2 workers replaced'
  );
  await page
    .locator('.cm-EventHistory')
    .screenshot({ path: docsScreenshot(test.info(), 'history-spec-edit.png') });
});

test('a gone cluster’s History keeps what it showed, and says "went with it" only when there is nothing', async ({
  page
}) => {
  // Given a cluster whose History is open, with its events
  const server = await fakeServer(page, [
    fakeCluster('g', { name: 'Going', last_decision: SCALE })
  ]);
  let gone = false;
  await page.route(/\/clustermgr\/api\/clusters\/g\/events(\?.*)?$/, route =>
    gone
      ? route.fulfill({
          status: 404,
          json: { error: 'not_found', message: 'no cluster g' }
        })
      : route.fulfill({ json: { events: EVENTS } })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar
    .locator('.cm-ClusterCard[data-cluster-id="g"]')
    .getByRole('button', { name: 'Event history of Going' })
    .click();
  const history = page.locator('.cm-EventHistory');
  const rows = history.locator('.cm-EventHistory-table tbody tr');
  await expect(rows).toHaveCount(4);

  // When the cluster goes (the server no longer knows it)
  gone = true;
  server.send({ type: 'removed', id: 'g' });

  // Then its history stays, under a line that says so, not "went with it"
  await expect(history.locator('.cm-EventHistory-error')).toHaveText(
    'This cluster is gone; below is its history until it went.'
  );
  await expect(rows).toHaveCount(4);

  // When a History is opened for a cluster the server has nothing of
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('clustermgr:show-events', {
      clusterId: 'g2',
      clusterName: 'Long gone'
    })
  );
  // Then, and only then, it says its history went with it
  const other = page.locator('.cm-EventHistory', {
    has: page.getByRole('heading', { name: 'Event history of Long gone' })
  });
  await expect(other.locator('.cm-EventHistory-error')).toHaveText(
    'This cluster is gone; its history went with it.'
  );
  await expect(other.locator('.cm-EventHistory-table tbody tr')).toHaveCount(0);
});
