/**
 * When the server cannot write its store (disk full, read-only, deleted),
 * the sidebar says so at once, with the server's reason, and stops saying it
 * once the store can be written again (observe without touching, lose
 * nothing). The server side is tested for real in
 * tests/test_store_failures.py; here a fake stream sends the same messages.
 */
import { expect, test } from './fixtures';

import { fakeCluster, fakeServer, openSidebar } from './fakes';

test.use({ autoGoto: false });

const FULL = 'database or disk is full';

test('a store that cannot be written is shown with its reason, and the banner goes when it recovers', async ({
  page
}) => {
  // Given a running cluster on a server whose store can be written
  const server = await fakeServer(page, [
    fakeCluster('a', { name: 'Durable' })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(1);
  const banner = sidebar.locator('.cm-ClusterPanel-storeError');
  await expect(banner).toHaveCount(0);

  // When the server pushes that its store cannot be written
  server.send({
    type: 'status',
    status: { store: { writable: false, error: FULL } }
  });

  // Then the sidebar says so, with the server's reason, and the cluster is still listed
  await expect(banner).toBeVisible();
  await expect(banner).toHaveAttribute('role', 'alert');
  await expect(banner).toContainText(`Clusters cannot be recorded: ${FULL}`);
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(1);

  // When the store can be written again
  server.send({
    type: 'status',
    status: { store: { writable: true, error: null } }
  });

  // Then the banner goes
  await expect(banner).toHaveCount(0);
});
