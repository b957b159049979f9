/**
 * The inserted Client cell, run for real: inserting it again replaces the
 * notebook's client rather than leaving one more connected. (With one
 * cluster the palette inserts it without asking which: notices.spec.ts.)
 */
import { expect, IJupyterLabPageFixture, test } from './fixtures';

import { openSidebar } from './fakes';
import {
  createCluster,
  removeCluster,
  runInNewCell,
  smallCluster,
  waitForCluster
} from './helpers';

/**
 * Insert the cluster's Client cell from its card, then run it; resolves when
 * it ran without an error.
 */
async function insertAndRun(
  page: IJupyterLabPageFixture,
  card: ReturnType<IJupyterLabPageFixture['locator']>
): Promise<void> {
  await card.getByRole('button', { name: /^Insert client code for / }).click();
  const index = await page.evaluate(
    () => (window as any).jupyterapp.shell.currentWidget.content.activeCellIndex
  );
  expect(await page.notebook.runCell(index)).toBe(true);
  const output = (await page.notebook.getCellTextOutput(index)) ?? [];
  expect(output.join('\n')).not.toMatch(/Error|Traceback/);
}

test('inserting the Client cell twice leaves one client open: the first is closed', async ({
  page
}) => {
  test.setTimeout(240000);
  // Given a running cluster and a notebook
  const cluster = await createCluster(page, smallCluster('one-client'));
  try {
    await waitForCluster(page, cluster.id);
    await page.notebook.createNew('clients.ipynb', { kernel: 'python3' });
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(
      `.cm-ClusterCard[data-cluster-id="${cluster.id}"]`
    );

    // When its Client cell is inserted and run, and then inserted and run again
    await insertAndRun(page, card);
    await runInNewCell(page, 'first, first_cluster = client, cluster');
    await insertAndRun(page, card);

    // Then the kernel has one open client: the first one was closed, the second is connected
    expect(
      await runInNewCell(
        page,
        'print(first is not client, first.status, client.status, len(client.scheduler_info()["workers"]))'
      )
    ).toBe('True closed running 1');
    // And one cluster object: the first one let go of the cluster (which runs on), the second follows it
    expect(
      await runInNewCell(
        page,
        'print(type(cluster).__name__, first_cluster.status.name, cluster.status.name, len(cluster.scheduler_info["workers"]))'
      )
    ).toBe('JupyterServerCluster closed running 1');
  } finally {
    await removeCluster(page, cluster.id);
  }
});
