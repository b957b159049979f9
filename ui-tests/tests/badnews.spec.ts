/**
 * The sidebar tells the truth, bad news included. A real cluster whose
 * scheduler is killed (SIGKILL) shows its true numbers, says why, is
 * notified, and comes back with Restart; bad news from events is notified;
 * words say what happened (Detach, Remove, no doubled words, the focus on
 * Cancel); a cluster started elsewhere is never said to have lost its data.
 */
import { expect, test } from './fixtures';
import { execFileSync } from 'child_process';

import {
  EXTERNAL_CAPABILITIES,
  fakeCluster,
  fakeServer,
  openSidebar
} from './fakes';
import {
  CLUSTER_TIMEOUT,
  createCluster,
  removeCluster,
  smallCluster,
  waitForCluster
} from './helpers';

/**
 * SIGKILL the process that listens on the scheduler's port (that scheduler
 * and nothing else).
 */
function killScheduler(address: string): void {
  const port = Number(address.split(':').pop());
  execFileSync(process.env.PYTHON || 'python3', [
    '-c',
    'import psutil, sys\n' +
      'port = int(sys.argv[1])\n' +
      'pids = {c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.status == "LISTEN"}\n' +
      'assert len(pids) == 1, pids\n' +
      'psutil.Process(pids.pop()).kill()',
    String(port)
  ]);
}

test('a killed scheduler: true numbers, the reason notified, Restart brings it back', async ({
  page
}) => {
  test.setTimeout(240000);
  // Given a running real cluster of one worker
  const { id } = await createCluster(page, smallCluster('phoenix'));
  try {
    const running = await waitForCluster(page, id);
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '1 running, 0 pending'
    );

    // When its scheduler is killed
    killScheduler(running.scheduler_address);

    // Then the card says failed with no worker and no core, and why
    await expect(card.locator('.cm-StatusBadge')).toHaveText('failed', {
      timeout: CLUSTER_TIMEOUT
    });
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '0 running, 0 pending'
    );
    await expect(card.locator('.cm-ClusterCard-resources')).toContainText(
      '0 cores'
    );
    await expect(card.locator('.cm-ClusterCard-error')).not.toBeEmpty();
    // And a notification says so, with the server's reason and a link to History
    const toast = page.locator('.jp-Notification-Toast-error', {
      hasText: 'phoenix:'
    });
    await expect(toast).toHaveCount(1);
    await expect(toast.getByRole('button', { name: 'History' })).toBeVisible();
    // And only what can work is offered: History, Restart and Remove
    await expect(
      card.locator('.cm-ClusterCard-actions').getByRole('button')
    ).toHaveText(['History', 'Logs', 'Restart', 'Remove']);

    // When it is restarted
    await card.getByRole('button', { name: 'Restart phoenix' }).click();
    // Then the same card (same id and name) runs its worker again
    await expect(card.locator('.cm-StatusBadge')).toHaveText('running', {
      timeout: CLUSTER_TIMEOUT
    });
    await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
      '1 running, 0 pending',
      { timeout: CLUSTER_TIMEOUT }
    );
    await expect(
      card.getByRole('button', { name: 'Scale phoenix' })
    ).toBeEnabled();
  } finally {
    await removeCluster(page, id);
  }
});

test('bad news from events is notified once; words say what happened', async ({
  page
}) => {
  // Given a local cluster and one attached from elsewhere
  const local = fakeCluster('l', {
    name: 'Local one',
    last_decision: {
      time: new Date().toISOString(),
      kind: 'scale',
      message: 'manual scale',
      group: 'default',
      before: 2,
      after: 2,
      source: 'manual'
    }
  });
  const attached = fakeCluster('x', {
    name: 'Attached one',
    template: 'attached',
    backend: 'external',
    capabilities: EXTERNAL_CAPABILITIES
  });
  const clusters = [local, attached];
  const server = await fakeServer(page, clusters);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="l"]');
  await expect(card).toBeVisible();

  // When a worker is killed and the server says why, twice (the same event resent)
  const killed = {
    time: new Date().toISOString(),
    kind: 'lifecycle',
    message: 'worker default-1 exited; replaced',
    group: 'default',
    before: null,
    after: null,
    source: 'system',
    cause: {
      kind: 'oom-killer',
      worker: 'default-1',
      group: 'default',
      detail: 'killed by the kernel OOM killer'
    }
  };
  for (let i = 0; i < 2; i++) {
    server.send({ type: 'changed', cluster: local, events: [killed] });
  }
  // Then one warning says so, with the cause
  const toast = page.locator('.jp-Notification-Toast-warning', {
    hasText: 'Local one: worker default-1 exited; replaced'
  });
  await expect(toast).toHaveCount(1);
  await expect(toast).toContainText('killed by the kernel OOM killer');

  // And the decision says neither "2 → 2" nor "manual scale · manual"
  await expect(card.locator('.cm-ClusterCard-decision')).not.toContainText('→');
  await expect(card.locator('.cm-ClusterCard-decisionMeta')).not.toContainText(
    'manual'
  );

  // And the attached card's button and menu say Detach, never Shut down
  const other = sidebar.locator('.cm-ClusterCard[data-cluster-id="x"]');
  await expect(
    other.getByRole('button', { name: 'Detach Attached one' })
  ).toHaveText('Detach');
  await other.click({ button: 'right', position: { x: 20, y: 10 } });
  const menu = page.locator('.lm-Menu');
  await expect(menu.getByText('Detach…')).toBeVisible();
  await expect(menu.getByText('Shut Down…')).toHaveCount(0);
  await page.keyboard.press('Escape');

  // And the Shut down confirmation has the focus on Cancel: Enter keeps the cluster
  await card.getByRole('button', { name: 'Shut down Local one' }).click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog.getByRole('button', { name: 'Cancel' })).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(dialog).toHaveCount(0);
  expect(server.calls.filter(c => c.method === 'DELETE')).toEqual([]);

  // When the server restarts without the attached cluster
  server.down = true;
  clusters.splice(1, 1);
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline');
  server.down = false;
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: 15000
  });
  // Then the notice never claims its data is gone: it may still run where it was started
  const notice = sidebar.locator('.cm-GoneNotice');
  await expect(notice).toContainText('No longer listed: Attached one');
  await expect(notice).toContainText('may still run there');
  await expect(notice).not.toContainText('data held in them, are gone');
});
