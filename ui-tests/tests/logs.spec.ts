/**
 * A cluster's logs and why its workers went away, against the real server:
 * the Logs tab opens from the card and follows a worker's output live; a
 * worker killed with SIGKILL shows the reason on the card and in History.
 */
import { expect, test } from './fixtures';

import { openSidebar } from './fakes';
import {
  CLUSTER_TIMEOUT,
  createCluster,
  removeCluster,
  runInNewCell,
  smallCluster,
  waitForCluster
} from './helpers';

const NAME = 'logs-test';

test.describe.configure({ timeout: 600000 });
test.use({ autoGoto: false });

test('the log tab follows a worker live; the card and History say why it went away', async ({
  page
}) => {
  await page.goto();
  // Given a running cluster of one worker, and a notebook with a client of it
  const created = await createCluster(page, smallCluster(NAME));
  try {
    await waitForCluster(page, created.id);
    await page.notebook.createNew('logs.ipynb', { kernel: 'python3' });
    await expect
      .poll(
        () =>
          runInNewCell(
            page,
            'from clustermgr_lab.client import get_client\n' +
              `client = get_client("${NAME}")\nprint(len(client.scheduler_info()["workers"]))`
          ),
        { timeout: 240000 }
      )
      .toBe('1');

    // When its Logs tab is opened from the card, on the worker's log
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(`[data-cluster-id="${created.id}"]`);
    await card.locator('.cm-LogsButton').click();
    const tab = page.locator(`#clustermgr-logs-${created.id}`);
    await expect(tab).toBeVisible();
    await tab.locator('.cm-LogViewer-picker').selectOption('default-1');
    await expect(tab.locator('.cm-LogViewer-status')).toContainText(
      'Following'
    );
    await expect(tab.locator('.cm-LogViewer-text')).toContainText(
      'Registered to'
    );

    // And the worker prints while the tab follows
    await page.getByRole('tab', { name: 'logs.ipynb' }).click();
    await runInNewCell(
      page,
      'client.run(lambda: print("followed-in-the-ui", flush=True))'
    );
    // Then the line appears in the tab without a reload
    await page.getByRole('tab', { name: `Logs ${NAME}` }).click();
    await expect(tab.locator('.cm-LogViewer-text')).toContainText(
      'followed-in-the-ui',
      { timeout: 30000 }
    );
    // And search keeps only the matching lines
    await tab.locator('.cm-LogViewer-search').fill('followed-in-the-ui');
    await expect(tab.locator('.cm-LogViewer-text')).toHaveText(
      /^[^\n]*followed-in-the-ui[^\n]*$/
    );

    // When the worker's processes are killed with SIGKILL
    await page.getByRole('tab', { name: 'logs.ipynb' }).click();
    await runInNewCell(
      page,
      'import os, signal\n' +
        'try:\n' +
        '    client.run(lambda: os.killpg(os.getpgrp(), signal.SIGKILL))\n' +
        'except Exception as exc:\n' +
        '    print(type(exc).__name__)'
    );
    // Then the card says why the worker went away
    const departure = card.locator('.cm-ClusterCard-departure');
    await expect(departure).toHaveAttribute('data-cause-kind', 'signal', {
      timeout: CLUSTER_TIMEOUT
    });
    await expect(departure).toContainText(
      'default-1: killed by signal 9 (SIGKILL)'
    );
    // And History shows the event with its cause
    await card.locator('.cm-HistoryButton').click();
    const history = page.locator(`#clustermgr-events-${created.id}`);
    await expect(
      history.locator('.cm-EventHistory-cause[data-cause-kind="signal"]')
    ).toHaveCount(1);
    await expect(history).toContainText(
      'worker default-1 went away: killed by signal 9 (SIGKILL)'
    );
  } finally {
    await removeCluster(page, created.id);
  }
});
