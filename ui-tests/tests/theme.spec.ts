/**
 * Screenshots of the sidebar with fixed data, in the light and dark themes
 * (kept as snapshots in ui-tests/tests/theme.spec.ts-snapshots).
 */
import { expect, IJupyterLabPageFixture, test } from './fixtures';

import {
  CPU_AND_GPU_SPEC,
  fakeCluster,
  fakeServer,
  GiB,
  openSidebar
} from './fakes';

test.use({ autoGoto: false, viewport: { width: 1280, height: 900 } });

const clusters = [
  fakeCluster('r', {
    name: 'Cluster 1',
    dashboard_url: '/clustermgr/dashboard/r/status',
    spec: CPU_AND_GPU_SPEC,
    workers: {
      requested: 3,
      running: 3,
      pending: 0,
      stopping: 0,
      groups: [
        { name: 'cpu', requested: 2, running: 2, pending: 0 },
        { name: 'gpu', requested: 1, running: 1, pending: 0 }
      ]
    },
    resources: { cores: 8, memory: 24 * GiB, gpus: 1 },
    adapt: {
      interval: 1,
      wait_count: 3,
      target_duration: 5,
      groups: [{ group: 'cpu', minimum: 1, maximum: 6, unit: 'workers' }]
    },
    last_decision: {
      time: '2026-01-01T12:00:00+00:00',
      kind: 'scale',
      message: '12 tasks queued, 5 s target duration',
      group: 'cpu',
      before: 1,
      after: 2,
      source: 'adaptive'
    }
  }),
  fakeCluster('p', {
    name: 'Cluster 2',
    status: 'pending',
    scheduler_address: null,
    workers: { requested: 2, running: 0, pending: 2, stopping: 0, groups: [] },
    resources: { cores: 0, memory: 0, gpus: 0 }
  }),
  fakeCluster('f', {
    name: 'Cluster 3',
    status: 'failed',
    scheduler_address: null,
    error: 'sbatch: error: invalid partition specified: gpu',
    workers: { requested: 0, running: 0, pending: 0, stopping: 0, groups: [] },
    resources: { cores: 0, memory: 0, gpus: 0 }
  })
];

async function shoot(page: IJupyterLabPageFixture, name: string) {
  await fakeServer(page, clusters);
  await page.goto();
  const sidebar = await openSidebar(page);
  await page.sidebar.setWidth(360, 'left');
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(3);
  await expect(sidebar).toHaveScreenshot(name, {
    maxDiffPixelRatio: 0.02,
    // The chart's right edge is "now".
    mask: [
      sidebar.locator('.cm-Sparkline'),
      sidebar.locator('.cm-ClusterCard-decisionMeta')
    ]
  });
  return sidebar;
}

test('light theme', async ({ page }) => {
  await shoot(page, 'sidebar-light.png');
});

test('dark theme', async ({ page }) => {
  await fakeServer(page, clusters);
  await page.goto();
  await page.evaluate(async () => {
    await (window as any).jupyterapp.commands.execute('apputils:change-theme', {
      theme: 'JupyterLab Dark'
    });
  });
  await expect(page.locator('body')).toHaveAttribute(
    'data-jp-theme-light',
    'false'
  );
  const sidebar = await openSidebar(page);
  await page.sidebar.setWidth(360, 'left');
  await expect(sidebar.locator('.cm-ClusterCard')).toHaveCount(3);
  // Colours come from the theme: the card background is dark.
  const background = await sidebar
    .locator('.cm-ClusterCard')
    .first()
    .evaluate(node => getComputedStyle(node).backgroundColor);
  const [r, g, b] = background.match(/\d+/g)!.map(Number);
  expect(r + g + b).toBeLessThan(200);
  await expect(sidebar).toHaveScreenshot('sidebar-dark.png', {
    maxDiffPixelRatio: 0.02,
    mask: [
      sidebar.locator('.cm-Sparkline'),
      sidebar.locator('.cm-ClusterCard-decisionMeta')
    ]
  });
});
