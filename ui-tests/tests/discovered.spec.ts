/**
 * A cluster a notebook starts (discovered by the server) and then closes
 * normally: its card says it was closed there, not that it failed.
 */
import { expect, test } from './fixtures';

import { errorToasts, openSidebar } from './fakes';
import { CLUSTER_TIMEOUT, runInNewCell } from './helpers';

// The notebook is named as its kernel knew it when it started (galata creates Untitled.ipynb, then renames it).
const CLOSED =
  /^closed in its notebook \S+\.ipynb: its scheduler shut down normally$/;

test('a notebook’s LocalCluster is listed by itself; closed there, its card says so, not "failed"', async ({
  page
}) => {
  test.setTimeout(240000);
  // Given a notebook whose LocalCluster the sidebar lists by itself
  await page.notebook.createNew('closing.ipynb', { kernel: 'python3' });
  const address = await runInNewCell(
    page,
    "from distributed import LocalCluster\nfound = LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address='127.0.0.1:0')\nprint(found.scheduler_address)"
  );
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard', {
    has: page.locator('.cm-ClusterCard-address', { hasText: address })
  });
  await expect(card.locator('.cm-ClusterCard-template')).toHaveText(
    'discovered',
    { timeout: 10000 }
  );
  await expect(card.locator('.cm-ExternalBadge')).toHaveText('external');
  await expect(card.locator('.cm-StatusBadge')).toHaveText('running', {
    timeout: CLUSTER_TIMEOUT
  });

  // When the notebook closes it
  await runInNewCell(page, 'found.close()');

  // Then its card says it stopped because it was closed in its notebook: no error, no bad news
  await expect(card.locator('.cm-StatusBadge')).toHaveText('stopped', {
    timeout: 30000
  });
  await expect(card.locator('.cm-ClusterCard-ended')).toHaveText(CLOSED);
  await expect(card.locator('.cm-ClusterCard-error')).toHaveCount(0);
  await expect(errorToasts(page)).toHaveCount(0);
  // And its History says the same, newest first
  await card.getByRole('button', { name: /^Event history of / }).click();
  const newest = page.locator('.cm-EventHistory-message').first();
  await expect(newest).toContainText('closed in its notebook');
  expect((await newest.innerText()).trim()).toMatch(CLOSED);

  // When it is removed, it leaves the list
  await card.getByRole('button', { name: /^Remove / }).click();
  await page
    .locator('.jp-Dialog')
    .getByRole('button', { name: 'Remove' })
    .click();
  await expect(card).toHaveCount(0, { timeout: 30000 });
});
