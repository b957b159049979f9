/**
 * The sidebar's model against a mocked server: it follows the WebSocket
 * stream (snapshot, added, changed, removed), reconnects on a sequence gap,
 * and falls back to GET when the stream cannot be reached.
 *
 * No real clusters: the stream and the list are answered by the browser.
 */
import { expect, IJupyterLabPageFixture, test } from './fixtures';
import type { WebSocketRoute } from '@playwright/test';

import { fakeCluster } from './fakes';

const STREAM = /\/clustermgr\/api\/stream(\?.*)?$/;
const LIST = /\/clustermgr\/api\/clusters(\?.*)?$/;

async function openSidebar(page: IJupyterLabPageFixture) {
  await page.goto();
  await page.getByRole('tab', { name: 'Clusters' }).click();
  const sidebar = page.locator('#clustermgr-sidebar');
  await expect(sidebar).toBeVisible();
  return sidebar;
}

test.use({ autoGoto: false });

test('follows the stream: snapshot, added, changed, removed', async ({
  page
}) => {
  const sockets: WebSocketRoute[] = [];
  await page.routeWebSocket(STREAM, ws => {
    sockets.push(ws);
    ws.send(
      JSON.stringify({ type: 'snapshot', seq: 1, clusters: [fakeCluster('a')] })
    );
  });
  let listCalls = 0;
  await page.route(LIST, route => {
    listCalls += 1;
    return route.fulfill({ json: { clusters: [] } });
  });

  const sidebar = await openSidebar(page);
  const cardA = sidebar.locator('.cm-ClusterCard[data-cluster-id="a"]');
  await expect(cardA).toBeVisible();
  await expect(cardA.locator('.cm-ClusterCard-memory')).toHaveText('1 GiB');
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveAttribute(
    'data-connected',
    'true'
  );

  const ws = sockets[0];
  ws.send(
    JSON.stringify({
      type: 'changed',
      seq: 2,
      cluster: fakeCluster('a', {
        status: 'scaling',
        workers: { requested: 4, running: 2, pending: 2, groups: [] },
        resources: { cores: 2, memory: 4294967296, gpus: 0 }
      })
    })
  );
  await expect(cardA.locator('.cm-StatusBadge')).toHaveText('scaling');
  await expect(cardA.locator('.cm-ClusterCard-workers')).toHaveText(
    '2 running, 2 pending'
  );
  await expect(cardA.locator('.cm-ClusterCard-memory')).toHaveText('4 GiB');

  ws.send(JSON.stringify({ type: 'added', seq: 3, cluster: fakeCluster('b') }));
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(2);

  ws.send(JSON.stringify({ type: 'removed', seq: 4, id: 'a' }));
  await expect(cardA).toHaveCount(0);
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(1);

  // No polling while the stream is up.
  expect(listCalls).toBe(0);

  // A lost message (seq 5 missing) makes the client start over.
  ws.send(JSON.stringify({ type: 'added', seq: 6, cluster: fakeCluster('c') }));
  await expect.poll(() => sockets.length, { timeout: 10000 }).toBe(2);
  // The fresh snapshot (cluster a only) replaces the list.
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(1);
  await expect(cardA).toBeVisible();
});

test('falls back to GET when the stream is unavailable', async ({ page }) => {
  let attempts = 0;
  await page.routeWebSocket(STREAM, ws => {
    attempts += 1;
    void ws.close({ code: 1011, reason: 'unavailable' });
  });
  await page.route(LIST, route =>
    route.fulfill({ json: { clusters: [fakeCluster('g')] } })
  );

  const sidebar = await openSidebar(page);
  await expect(
    sidebar.locator('.cm-ClusterCard[data-cluster-id="g"]')
  ).toBeVisible();
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveAttribute(
    'data-connected',
    'false'
  );
  // It keeps trying to reconnect, with a growing delay.
  await expect.poll(() => attempts, { timeout: 10000 }).toBeGreaterThan(1);
});
