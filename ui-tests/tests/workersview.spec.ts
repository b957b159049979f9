/**
 * A card's Workers list, from a real cluster (issue 41, point 4): each
 * worker's name, group, address, host, PID, memory and state, followed
 * through a Worker Spec edit that replaces them; History then says what
 * the edit did.
 */
import { expect, test } from './fixtures';

import { openSidebar } from './fakes';
import {
  CLUSTER_TIMEOUT,
  createCluster,
  docsScreenshot,
  removeCluster,
  waitForCluster
} from './helpers';

const NAME = 'workers-view';

const spec = (memory: string) => ({
  groups: [{ name: 'default', count: 2, threads: 1, memory }]
});

test('the Workers list names each worker with its group, address, host, PID, memory and state', async ({
  page
}) => {
  test.setTimeout(300000);
  await page.setViewportSize({ width: 1400, height: 900 });
  // Given a running cluster of two workers
  const { id } = await createCluster(page, {
    name: NAME,
    template: 'local',
    adapt: null,
    spec: spec('512 MiB')
  });
  try {
    await waitForCluster(page, id, c => c.workers?.running === 2);
    const sidebar = await openSidebar(page);
    await page.sidebar.setWidth(320, 'left');
    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);

    // When its Workers list is opened
    await card.getByRole('button', { name: `Workers of ${NAME}` }).click();
    const list = card.getByRole('list', { name: `Workers of ${NAME}` });
    const items = list.locator('.cm-WorkerList-item');

    // Then each worker shows its name, group, address, host, PID, memory and state
    await expect(items).toHaveCount(2, { timeout: CLUSTER_TIMEOUT });
    const answer = await (
      await page.request.get(`/clustermgr/api/clusters/${id}/workers`)
    ).json();
    expect(answer.workers).toHaveLength(2);
    for (const worker of answer.workers) {
      const item = list.locator(
        `.cm-WorkerList-item[data-worker="${worker.name}"]`
      );
      await expect(item.locator('.cm-WorkerList-name')).toHaveText(worker.name);
      await expect(item.locator('.cm-WorkerList-group')).toHaveText('default');
      await expect(item.locator('.cm-WorkerList-state')).toHaveText('running');
      await expect(item.locator('.cm-WorkerList-address')).toHaveText(
        /^tls:\/\/127\.0\.0\.1:\d+$/
      );
      await expect(item.locator('.cm-WorkerList-host')).toHaveText(/^host \S+/);
      // A local worker: its process id
      expect(worker.pid).toBeGreaterThan(1);
      await expect(item.locator('.cm-WorkerList-pid')).toHaveText(
        `PID ${worker.pid}`
      );
      await expect(item.locator('.cm-WorkerList-memory')).toHaveText(
        /^([\d.]+ [KMG]iB of )?512 MiB( limit)?$/
      );
    }
    await card.screenshot({ path: docsScreenshot(test.info(), 'workers.png') });

    // When the Worker Spec is edited (512 MiB → 768 MiB: both workers replaced)
    const patched = await page.request.patch(`/clustermgr/api/clusters/${id}`, {
      data: { spec: spec('768 MiB') }
    });
    expect(patched.status()).toBe(200);
    // Then the list follows: two running workers of 768 MiB
    await expect(
      list.locator(
        '.cm-WorkerList-item[data-state="running"] .cm-WorkerList-memory',
        { hasText: /768 MiB/ }
      )
    ).toHaveCount(2, { timeout: CLUSTER_TIMEOUT });

    // And History has the spec edit, by "spec"
    await card
      .getByRole('button', { name: `Event history of ${NAME}` })
      .click();
    const history = page.locator('.cm-EventHistory');
    await expect(history).toBeVisible();
    await expect(
      history.locator('td[data-label="by"]', { hasText: 'spec' }).first()
    ).toBeVisible();
    await history.screenshot({
      path: docsScreenshot(test.info(), 'history-spec-edit.png')
    });
  } finally {
    await removeCluster(page, id);
  }
});
