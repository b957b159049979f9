/**
 * A dask-gateway cluster from New Cluster: the gateway's own options are the
 * form (real dask-gateway server, started by jupyter_server_test_config.py),
 * and the cluster runs on the gateway, reached through its proxy.
 */
import { expect, test } from './fixtures';

import { openSidebar } from './fakes';
import { removeCluster, waitForCluster } from './helpers';

test("a gateway cluster is created from New Cluster with the gateway's options", async ({
  page
}) => {
  test.setTimeout(300000);
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  await dialog.locator('[data-template="gateway"] input[type="radio"]').check();

  // The gateway's options, with their defaults, choices and bounds.
  const cores = dialog.locator('input[data-option="worker_cores"]');
  await expect(cores).toHaveValue('1');
  await expect(
    dialog.locator('select[data-option="environment"] option')
  ).toHaveText(['base', 'ml']);

  await dialog.getByLabel('Name', { exact: true }).fill('gateway-ui');
  await cores.fill('2');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog).toHaveCount(0);
  const card = sidebar.locator('.cm-ClusterCard', { hasText: 'gateway-ui' });
  const id = await card.getAttribute('data-cluster-id');
  try {
    const cluster = await waitForCluster(
      page,
      id!,
      c => c.status === 'running'
    );
    expect(cluster.backend).toBe('gateway');
    expect(cluster.scheduler_address).toMatch(
      /^gateway:\/\/127\.0\.0\.1:\d+\//
    );
    expect(cluster.options.worker_cores).toBe(2);
    await expect(card.locator('.cm-ClusterCard-options')).toContainText(
      'worker_cores 2'
    );
  } finally {
    await removeCluster(page, id!);
  }
});
