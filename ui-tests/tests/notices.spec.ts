/**
 * What the sidebar tells the user without being asked, against a fake
 * server: a template whose backend cannot work here is marked in New Cluster
 * with the reason; the dashboard of a cluster named "Cluster 1" says
 * "Cluster 1 is gone", not "Cluster Cluster 1"; a refused job, an
 * unresponsive scheduler and a cluster gone while offline are notified once
 * each. And the palette inserts the Client cell of the only cluster without
 * asking which.
 */
import { expect, test } from './fixtures';

import {
  fakeCluster,
  fakeServer,
  fromPalette,
  LIMITS,
  openSidebar,
  type IFakeServer,
  TEMPLATE_LIST,
  TEMPLATES
} from './fakes';
import { clientCellText, getSources } from './helpers';

test('a template whose backend cannot work here is marked in New Cluster, with the reason', async ({
  page
}) => {
  // Given a SLURM template on a machine whose controller does not answer
  const reason =
    'the SLURM controller does not answer: sbatch: error: unable to contact slurm controller';
  await fakeServer(page, []);
  await page.route(TEMPLATES, route =>
    route.fulfill({
      json: {
        templates: [
          ...TEMPLATE_LIST,
          {
            ...TEMPLATE_LIST[0],
            name: 'hpc',
            description: 'SLURM jobs',
            backend: 'slurm',
            available: false,
            unavailable_reason: reason
          }
        ],
        limits: LIMITS
      }
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);

  // When New Cluster is opened
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  const hpc = dialog.locator('[data-template="hpc"]');

  // Then that template says why it is not available, and cannot be chosen
  await expect(hpc).toContainText(`Not available here: ${reason}`);
  await expect(hpc.locator('input[type="radio"]')).toBeDisabled();
  // And the others can
  await expect(
    dialog.locator('[data-template="local"] input[type="radio"]')
  ).toBeEnabled();
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();
});

test('the dashboard of a cluster named "Cluster 1" says "Cluster 1 is gone"', async ({
  page
}) => {
  // Given the dashboard tab of a cluster named "Cluster 1"
  const server = await fakeServer(page, [
    fakeCluster('c1', {
      name: 'Cluster 1',
      dashboard_url: '/clustermgr/dashboard/c1/status'
    })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar
    .getByRole('button', { name: 'Open the dashboard of Cluster 1' })
    .click();
  await expect(page.getByRole('tab', { name: 'Dask Cluster 1' })).toBeVisible();

  // When the cluster goes away
  server.send({ type: 'removed', id: 'c1' });

  // Then the tab says so by its name, the word "Cluster" once
  await expect(page.locator('.cm-DashboardView-message')).toHaveText(
    /^Cluster 1 is gone \(/
  );
});

test('the palette inserts the Client cell of the only cluster without asking which', async ({
  page
}) => {
  // Given one running cluster and a notebook
  await fakeServer(page, [
    fakeCluster('one', {
      name: 'Only one',
      scheduler_address: 'tcp://127.0.0.1:7'
    })
  ]);
  await page.goto();
  await openSidebar(page);
  await page.notebook.createNew('only.ipynb');

  // When Insert Client Cell for Cluster… is run from the palette
  await fromPalette(
    page,
    'Insert Client Cell for Cluster',
    'Insert Client Cell for Cluster…'
  );

  // Then no dialog asks which cluster, and the cell connects to that one
  await expect
    .poll(async () => (await getSources(page)).join('\n'))
    .toContain(clientCellText({ name: 'Only one' }));
  await expect(page.locator('.jp-Dialog')).toHaveCount(0);
});

test('a refused job, an unresponsive scheduler and a cluster gone while offline are each notified once', async ({
  page
}) => {
  // Given two running clusters
  const refused = fakeCluster('j', { name: 'Jobs' });
  const frozen = fakeCluster('u', { name: 'Frozen' });
  const clusters = [refused, frozen];
  const server: IFakeServer = await fakeServer(page, clusters);
  await page.goto();
  const sidebar = await openSidebar(page);
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(2);
  const toast = (text: string) =>
    page.locator(
      '.jp-Notification-Toast-error, .jp-Notification-Toast-warning',
      {
        hasText: text
      }
    );

  // When sbatch refuses a group's job (said twice), and a scheduler stops answering
  const error = 'sbatch: error: invalid partition specified: gpu';
  const withError = {
    ...refused,
    workers: {
      ...refused.workers,
      groups: [{ ...refused.workers.groups[0], error }]
    }
  };
  for (let i = 0; i < 2; i++) {
    server.send({ type: 'changed', cluster: withError, events: [] });
  }
  server.send({
    type: 'changed',
    cluster: { ...frozen, status: 'unresponsive' },
    events: []
  });

  // Then each is one notification with the server's reason
  await expect(toast(`Jobs: group default: ${error}`)).toHaveCount(1);
  await expect(toast('Frozen: the cluster is unresponsive')).toHaveCount(1);

  // When "Jobs" ends while the server is out of reach
  server.down = true;
  clusters.splice(0, 1);
  await server.sockets[0].close({ code: 1011, reason: 'down' });
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline');
  server.down = false;
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: 15000
  });
  // Then that is notified too, once
  await expect(
    toast('Jobs is gone: it stopped while the sidebar could not see it')
  ).toHaveCount(1);
});
