/**
 * The sidebar follows each cluster's and template's `capabilities`, never
 * its backend's name: a cluster the server cannot scale or stop is marked
 * external, its editors are greyed out and it is detached; machine limits
 * warn only for workers that run on the server's host; a backend that takes
 * one group offers no "Add group".
 *
 * Against a fake server: the capabilities are exact and no cluster starts.
 */
import { expect, test } from './fixtures';

import {
  BATCH_CAPABILITIES,
  CLUSTER_CLASS_CAPABILITIES,
  EXTERNAL_CAPABILITIES,
  fakeCluster,
  fakeServer,
  GiB,
  LOCAL_CAPABILITIES,
  openSidebar,
  TEMPLATES
} from './fakes';

test.use({ autoGoto: false });

const attached = fakeCluster('x', {
  name: 'Attached one',
  template: 'attached',
  backend: 'external',
  capabilities: EXTERNAL_CAPABILITIES
});

test('a cluster the server cannot scale or stop is external, read-only and detached', async ({
  page
}) => {
  // Given an attached cluster and a local one
  const server = await fakeServer(page, [
    attached,
    fakeCluster('l', { name: 'Local one' })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="x"]');
  const local = sidebar.locator('.cm-ClusterCard[data-cluster-id="l"]');

  // Then only the attached one is marked external, with its editors greyed out
  await expect(card.locator('.cm-ExternalBadge')).toHaveText('external');
  await expect(local.locator('.cm-ExternalBadge')).toHaveCount(0);
  for (const name of [
    'Scale Attached one',
    'Adaptive mode of Attached one',
    'Edit the Worker Spec of Attached one'
  ]) {
    await expect(card.getByRole('button', { name })).toBeDisabled();
  }
  await expect(
    local.getByRole('button', { name: 'Scale Local one' })
  ).toBeEnabled();
  await expect(
    card.getByRole('button', { name: 'Detach Attached one' })
  ).toHaveText('Detach');
  await expect(
    local.getByRole('button', { name: 'Shut down Local one' })
  ).toHaveText('Shut down');

  // And its context menu offers no scaling either
  await card.click({ button: 'right', position: { x: 20, y: 10 } });
  const menu = page.locator('.lm-Menu');
  await expect(menu.getByText('Scale…')).toBeVisible();
  await expect(
    menu.locator('.lm-Menu-item', { hasText: 'Scale…' })
  ).toHaveAttribute('aria-disabled', 'true');
  await page.keyboard.press('Escape');

  // When it is removed, the confirmation says it is detached, not shut down
  await card.getByRole('button', { name: 'Detach Attached one' }).click();
  const confirm = page.locator('.jp-Dialog');
  await expect(confirm.locator('.jp-Dialog-header')).toHaveText(
    'Detach Attached one?'
  );
  await expect(confirm.locator('.jp-Dialog-body')).toContainText(
    'keep running'
  );
  await confirm.getByRole('button', { name: 'Detach' }).click();
  await expect
    .poll(() => server.calls.map(c => `${c.method} ${c.path}`))
    .toEqual(['DELETE /clustermgr/api/clusters/x']);
});

test('a cluster that cannot be scaled but can be stopped is shut down, not detached', async ({
  page
}) => {
  // Given a cluster of a (hypothetical) fixed-size backend the server started
  const fixed = fakeCluster('f', {
    name: 'Fixed one',
    capabilities: { ...LOCAL_CAPABILITIES, can_scale: false }
  });
  await fakeServer(page, [fixed]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="f"]');

  // Then it cannot be scaled, is not external, and its button shuts it down
  await expect(
    card.getByRole('button', { name: 'Scale Fixed one' })
  ).toBeDisabled();
  await expect(card.locator('.cm-ExternalBadge')).toHaveCount(0);
  await expect(
    card.getByRole('button', { name: 'Shut down Fixed one' })
  ).toHaveText('Shut down');
});

test('machine limits warn only for workers on this host; one-group backends add no group', async ({
  page
}) => {
  // Given a local template, a batch one and a single-group one, each with 32 cores of workers
  const spec = {
    groups: [
      {
        name: 'default',
        count: 8,
        threads: 4,
        memory: 2 * GiB,
        gpus: 0,
        resources: {}
      }
    ]
  };
  const template = (name: string, capabilities: Record<string, boolean>) => ({
    name,
    description: `${name} workers`,
    backend: 'local',
    spec,
    adapt: null,
    user_options: [],
    capabilities
  });
  await fakeServer(page, []);
  await page.route(TEMPLATES, route =>
    route.fulfill({
      json: {
        templates: [
          template('here', LOCAL_CAPABILITIES),
          template('batch', BATCH_CAPABILITIES),
          template('single', { ...LOCAL_CAPABILITIES, multiple_groups: false })
        ],
        limits: {
          max_workers: 100,
          max_clusters: 8,
          machine: { cores: 16, memory: 64 * GiB }
        }
      }
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  const templates = dialog.getByRole('radiogroup', { name: 'Template' });
  const warnings = dialog.locator('.cm-SpecEditor-total .cm-Preview-warning');
  const addGroup = dialog.getByRole('button', { name: 'Add group' });

  // Then workers on this host are checked against its 16 cores
  await expect(templates.getByRole('radio', { name: /^here/ })).toBeChecked();
  await expect(warnings).toHaveText([
    'More than this machine’s 16 cores: workers will compete for them'
  ]);
  await expect(addGroup).toBeEnabled();

  // When the batch template is chosen, its jobs run elsewhere: no machine warning
  await templates.getByRole('radio', { name: /^batch/ }).check();
  await expect(dialog.getByLabel('Number of workers, group 1')).toHaveValue(
    '8'
  );
  await expect(warnings).toHaveCount(0);
  await expect(addGroup).toBeEnabled();

  // When a backend takes a single group, no group can be added
  await templates.getByRole('radio', { name: /^single/ }).check();
  await expect(addGroup).toBeDisabled();
  await expect(dialog.locator('.cm-SpecEditor-group')).toHaveCount(1);
});

test('a Cluster class cluster scales by count: its spec editing is greyed out with the reason', async ({
  page
}) => {
  // Given a cluster run by a Cluster class, and its template
  const cluster = fakeCluster('c', {
    name: 'Class one',
    template: 'slurm-class',
    backend: 'cluster-class',
    capabilities: CLUSTER_CLASS_CAPABILITIES
  });
  await fakeServer(page, [cluster]);
  await page.route(TEMPLATES, route =>
    route.fulfill({
      json: {
        templates: [
          {
            name: 'slurm-class',
            description: 'dask_jobqueue.SLURMCluster',
            backend: 'cluster-class',
            spec: cluster.spec,
            adapt: null,
            user_options: [],
            capabilities: CLUSTER_CLASS_CAPABILITIES
          }
        ],
        limits: {
          max_workers: 32,
          max_clusters: 8,
          machine: { cores: 2, memory: 4 * GiB }
        }
      }
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="c"]');
  const reasons = CLUSTER_CLASS_CAPABILITIES.reasons;

  // Then it can be scaled, but its Spec button is greyed out and says why
  await expect(
    card.getByRole('button', { name: 'Scale Class one' })
  ).toBeEnabled();
  const spec = card.getByRole('button', {
    name: 'Edit the Worker Spec of Class one'
  });
  await expect(spec).toBeDisabled();
  await expect(spec).toHaveAttribute('title', `Spec: ${reasons.editable_spec}`);

  // When a new cluster of its template is set up, only the count can change; no group can be added, with the reasons
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  await expect(dialog.getByLabel('Number of workers, group 1')).toBeEnabled();
  const threads = dialog.locator('.cm-SpecEditor-threads input');
  await expect(threads).toBeDisabled();
  await expect(threads).toHaveAttribute('title', reasons.editable_spec);
  const addGroup = dialog.getByRole('button', { name: 'Add group' });
  await expect(addGroup).toBeDisabled();
  await expect(addGroup).toHaveAttribute('title', reasons.multiple_groups);
});
