/**
 * Clusters started elsewhere: a notebook's LocalCluster attached from the
 * sidebar, its client inserted and working (one started with the server's
 * discovery on, listed by itself: discovered.spec.ts). An address nothing answers at keeps the dialog open with the reason.
 */
import { expect, test } from './fixtures';
import { createServer } from 'net';

import { openSidebar } from './fakes';
import { clientCellText, CLUSTER_TIMEOUT, runInNewCell } from './helpers';

test('attach a notebook’s LocalCluster and insert its client', async ({
  page
}) => {
  test.setTimeout(300000);
  await page.notebook.createNew('attach.ipynb', { kernel: 'python3' });
  // A cluster the server is not told about (discovery off for this one).
  const address = await runInNewCell(
    page,
    [
      'import dask',
      'from distributed import LocalCluster',
      "no_discovery = dask.config.set({'distributed.scheduler.preload': []})",
      "outside = LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address='127.0.0.1:0')",
      'no_discovery.__exit__(None, None, None)',
      'print(outside.scheduler_address)'
    ].join('\n')
  );
  expect(address).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);

  const sidebar = await openSidebar(page);
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(0);

  // Attach it from the sidebar.
  await sidebar
    .getByRole('button', { name: 'Attach a cluster started elsewhere' })
    .click();
  const dialog = page.locator('.jp-Dialog');
  await dialog.getByRole('textbox').fill(address);
  await dialog.getByRole('button', { name: 'Attach' }).click();
  const card = sidebar.locator('.cm-ClusterCard', {
    has: page.locator('.cm-ClusterCard-address', { hasText: address })
  });
  await expect(card.locator('.cm-ExternalBadge')).toHaveText('external');
  await expect(card.locator('.cm-ClusterCard-template')).toHaveText('attached');
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '1 running, 0 pending',
    {
      timeout: CLUSTER_TIMEOUT
    }
  );
  await expect(card.getByRole('button', { name: /^Scale / })).toBeDisabled();
  await expect(
    card.getByRole('button', { name: /^Dashboard plots of / })
  ).toBeEnabled();

  // Insert its client into the notebook, and use it.
  await card.getByRole('button', { name: /^Insert client code for / }).click();
  const index = (await page.notebook.getCellCount()) - 1;
  const name = (await card.locator('.cm-ClusterCard-name').textContent())!;
  expect(await page.notebook.getCellTextInput(index)).toBe(
    clientCellText({ name })
  );
  expect(await page.notebook.runCell(index)).toBe(true);
  expect(
    await runInNewCell(page, "print(len(client.scheduler_info()['workers']))")
  ).toBe('1');

  // Detaching leaves the cluster running.
  await card.getByRole('button', { name: /^Detach / }).click();
  await expect(page.locator('.jp-Dialog-header')).toHaveText(/^Detach /);
  await page
    .locator('.jp-Dialog')
    .getByRole('button', { name: 'Detach' })
    .click();
  await expect(card).toHaveCount(0, { timeout: CLUSTER_TIMEOUT });
  expect(
    await runInNewCell(page, "print(len(client.scheduler_info()['workers']))")
  ).toBe('1');
  await runInNewCell(page, 'client.close(); outside.close()');
});

/**
 * A local port nothing listens on (it was free a moment ago).
 */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise(resolve => server.close(resolve));
  return port;
}

test('attaching an address nothing answers at keeps the dialog open with the reason', async ({
  page
}) => {
  // Given an address where no scheduler listens
  const address = `tcp://127.0.0.1:${await closedPort()}`;
  const sidebar = await openSidebar(page);

  // When it is attached from the sidebar
  await sidebar
    .getByRole('button', { name: 'Attach a cluster started elsewhere' })
    .click();
  const dialog = page.locator('.jp-Dialog');
  await dialog.getByRole('textbox').fill(address);
  await dialog.getByRole('button', { name: 'Attach' }).click();

  // Then the dialog stays open and says why, with something after the colon
  const reason = dialog.locator('.cm-FieldError');
  await expect(reason).toHaveText(
    new RegExp(
      `^Could not attach it: cannot reach the scheduler at ${address}: \\S`
    ),
    {
      timeout: CLUSTER_TIMEOUT
    }
  );
  expect((await reason.innerText()).trim()).not.toMatch(/:$/);
  await expect(dialog.getByRole('textbox')).toHaveValue(address);
  await expect(dialog.getByRole('textbox')).toHaveAttribute(
    'aria-invalid',
    'true'
  );
  // And nothing is left listed
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(0, {
    timeout: CLUSTER_TIMEOUT
  });
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();
  await expect(dialog).toHaveCount(0);
});
