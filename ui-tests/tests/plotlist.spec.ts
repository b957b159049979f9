/**
 * The card's Plots list, from a real scheduler's dashboard: the most used
 * plots first, the rest grouped and sorted, GPU plots left out on a cluster
 * without GPUs (and the list says so).
 */
import { expect, test } from './fixtures';

import { openSidebar } from './fakes';
import {
  createCluster,
  removeCluster,
  smallCluster,
  waitForCluster
} from './helpers';

const NAME = 'plotlist-test';

test('the Plots list offers the most used plots first, the rest in sorted groups, and no GPU plots without GPUs', async ({
  page
}) => {
  // Given a running cluster without GPUs
  const { id } = await createCluster(page, smallCluster(NAME));
  try {
    await waitForCluster(page, id);
    const sidebar = await openSidebar(page);
    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);

    // When its Plots list is opened
    await card
      .getByRole('button', { name: `Dashboard plots of ${NAME}` })
      .click();
    const plots = card.getByRole('list', { name: `Plots of ${NAME}` });

    // Then the most used plots come first, in the order a Dask user expects
    const mostUsed = plots.getByRole('list', { name: 'Most used' });
    await expect(mostUsed.getByRole('button')).toHaveText([
      'Task Stream',
      'Progress',
      'Workers Memory',
      'Task Processing',
      'Task Graph',
      'CPU',
      'Cluster Memory',
      'Workers'
    ]);
    const everyButton = plots.getByRole('button');
    await expect(everyButton.first()).toHaveText('Task Stream');

    // And the rest are in named groups, each sorted by name
    await expect(plots.locator('.cm-PlotList-heading')).toHaveText([
      'Most used',
      'Tasks',
      'Memory',
      'Performance',
      'Network and disk',
      'System'
    ]);
    for (const group of ['Tasks', 'Performance', 'Network and disk']) {
      const names = await plots
        .getByRole('list', { name: group, exact: true })
        .getByRole('button')
        .allTextContents();
      expect(names.length).toBeGreaterThan(1);
      expect(names).toEqual(
        [...names].sort((a, b) =>
          a.localeCompare(b, 'en', { sensitivity: 'base' })
        )
      );
    }

    // And no GPU plot is offered on this cluster, which the list says
    const labels = await everyButton.allTextContents();
    expect(labels.filter(label => /gpu|rmm/i.test(label))).toEqual([]);
    expect(labels.length).toBeGreaterThanOrEqual(25);
    await expect(plots.locator('.cm-PlotList-note')).toHaveText(
      '3 GPU plots not shown: no GPUs on this cluster'
    );

    // And a plot opens under its readable name
    await plots
      .getByRole('button', { name: 'Task Processing', exact: true })
      .click();
    await expect(
      page.getByRole('tab', { name: `Task Processing · ${NAME}` })
    ).toBeVisible();
    await expect(
      page.locator(`#clustermgr-plot-${id}-individual-nprocessing iframe`)
    ).toHaveAttribute('src', /\/individual-nprocessing$/);
  } finally {
    await removeCluster(page, id);
  }
});
