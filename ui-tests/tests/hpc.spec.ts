/**
 * Batch templates in the sidebar: the template's user options in New Cluster
 * (checked by the real server, its message next to the option), the options
 * and why workers wait on the card (real SLURM: 4 one-CPU jobs on a 2-CPU
 * node), and a group whose jobs the batch system refused (fake server).
 */
import { expect, test } from './fixtures';

import {
  BATCH_CAPABILITIES,
  fakeCluster,
  fakeServer,
  openSidebar
} from './fakes';
import { CLUSTER_TIMEOUT, removeCluster, waitForCluster } from './helpers';

test('user options are set in New Cluster and the card says why workers wait', async ({
  page
}) => {
  test.setTimeout(300000);
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  await dialog.locator('[data-template="hpc"] input[type="radio"]').check();
  await expect(
    dialog.locator('[data-template="hpc"] .cm-Template-defaults')
  ).toContainText('options: walltime, nice');

  // The template's options, with their defaults, choices and bounds.
  const walltime = dialog.locator('select[data-option="walltime"]');
  const nice = dialog.locator('input[data-option="nice"]');
  await expect(walltime).toHaveValue('00:30:00');
  await expect(walltime.locator('option')).toHaveText(['00:20:00', '00:30:00']);
  await expect(nice).toHaveValue('0');
  await expect(
    dialog.locator('.cm-UserOption .cm-Field-label').nth(1)
  ).toHaveText('nice (≥ 0, ≤ 100)');

  // A value out of bounds: the server's message next to that option; nothing created.
  await dialog.getByLabel('Name', { exact: true }).fill('hpc-ui');
  await walltime.selectOption('00:20:00');
  await nice.fill('500');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog.locator('#cm-new-option-nice-error')).toHaveText(
    'must be at most 100, not 500'
  );
  await expect(nice).toHaveAttribute('aria-invalid', 'true');

  await nice.fill('5');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog).toHaveCount(0);
  const card = sidebar.locator('.cm-ClusterCard', { hasText: 'hpc-ui' });
  const id = await card.getAttribute('data-cluster-id');
  try {
    await expect(card.locator('.cm-ClusterCard-options')).toHaveText(
      'walltime 00:20:00 · nice 5'
    );
    // 4 one-CPU workers on the 2-CPU node: what does not fit waits, with SLURM's reason.
    await waitForCluster(
      page,
      id!,
      c =>
        c.workers.running >= 1 &&
        (c.workers.pending_reasons.Resources ?? 0) >= 1
    );
    await expect(card.locator('.cm-ClusterCard-workersPending')).toHaveText(
      /^\d pending — (Resources|\d Resources, .*|.*, \d Resources.*)$/,
      { timeout: CLUSTER_TIMEOUT }
    );
  } finally {
    await removeCluster(page, id!);
  }
});

test('the card shows pending reasons and a refused group', async ({ page }) => {
  await fakeServer(page, [
    fakeCluster('waits', {
      name: 'waits',
      backend: 'slurm',
      capabilities: BATCH_CAPABILITIES,
      options: { walltime: '04:00:00' },
      workers: {
        requested: 4,
        running: 2,
        pending: 2,
        pending_reasons: { Resources: 2 },
        waiting: [
          {
            name: 'default-3',
            group: 'default',
            reason: 'Resources',
            job_id: '17'
          },
          {
            name: 'default-4',
            group: 'default',
            reason: 'Resources',
            job_id: '18'
          }
        ],
        stopping: 0,
        groups: [
          {
            name: 'default',
            requested: 4,
            running: 2,
            pending: 2,
            pending_reasons: { Resources: 2 },
            error: null
          },
          {
            name: 'gpu',
            requested: 0,
            running: 0,
            pending: 0,
            pending_reasons: {},
            error:
              'sbatch refused worker gpu-5: sbatch: error: invalid partition specified: nowhere'
          }
        ]
      }
    })
  ]);
  await page.goto();
  const sidebar = await openSidebar(page);
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="waits"]');
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '2 running, 2 pending — Resources'
  );
  await expect(card.locator('.cm-ClusterCard-workersPending')).toHaveAttribute(
    'title',
    'default-3: job 17 Resources\ndefault-4: job 18 Resources'
  );
  await expect(card.locator('.cm-ClusterCard-options')).toHaveText(
    'walltime 04:00:00'
  );
  await expect(card.getByRole('alert')).toHaveText(
    'gpu: sbatch refused worker gpu-5: sbatch: error: invalid partition specified: nowhere'
  );
});
