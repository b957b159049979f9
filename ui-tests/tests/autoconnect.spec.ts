/**
 * The autoConnectCluster setting: new notebook kernels connect a client to
 * that cluster by themselves, again after a restart, and no more once the
 * cluster is gone.
 */
import { expect, galata, IJupyterLabPageFixture, test } from './fixtures';

import {
  createCluster,
  removeCluster,
  runInNewCell,
  smallCluster,
  waitForCluster
} from './helpers';

const NAME = 'auto-connect-test';

test.use({
  // galata's kernel mock answers a restart with "201 Created", which
  // JupyterLab refuses: let the real server answer.
  kernels: null,
  mockSettings: {
    ...galata.DEFAULT_SETTINGS,
    'clustermgr-lab:plugin': { autoConnectCluster: NAME }
  }
});

/**
 * Restart the kernel the way a user does: Kernel menu, then confirm.
 */
async function restartKernel(page: IJupyterLabPageFixture): Promise<void> {
  await page.menu.clickMenuItem('Kernel>Restart Kernel…');
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept').click();
  await expect(page.locator('.jp-Dialog')).toHaveCount(0);
}

test('new and restarted kernels connect to the chosen cluster', async ({
  page
}) => {
  test.setTimeout(300000);
  const { id } = await createCluster(page, smallCluster(NAME));
  let removed = false;
  try {
    const cluster = await waitForCluster(page, id);
    const address = cluster.scheduler_address;
    // The sidebar's model must know the cluster before the kernel starts.
    await page.getByRole('tab', { name: 'Clusters' }).click();
    await expect(
      page.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`)
    ).toBeVisible();

    await page.notebook.createNew('autoconnect.ipynb', { kernel: 'python3' });
    const check = 'print(client.scheduler.address)';
    await expect
      .poll(() => runInNewCell(page, check), { timeout: 120000 })
      .toBe(address);
    // Nothing shows in the notebook: the code ran silently.
    expect(await page.notebook.getCellCount()).toBeGreaterThanOrEqual(1);

    await restartKernel(page);
    await expect
      .poll(() => runInNewCell(page, check), { timeout: 120000 })
      .toBe(address);

    await removeCluster(page, id);
    removed = true;
    await expect(
      page.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`)
    ).toHaveCount(0);
    await restartKernel(page);
    await expect
      .poll(() => runInNewCell(page, "print('client' in globals())"), {
        timeout: 120000
      })
      .toBe('False');
  } finally {
    if (!removed) {
      await removeCluster(page, id);
    }
  }
});
