/**
 * Walking skeleton: sidebar → new cluster → drag it into a notebook →
 * run the client cell against the real cluster → shut the cluster down.
 */
import { expect, test } from './fixtures';

import {
  clientCellText,
  CLUSTER_TIMEOUT,
  getSources,
  waitForCluster
} from './helpers';

test.describe('clustermgr-lab skeleton', () => {
  test('new cluster, drag into notebook, run client, shut down', async ({
    page
  }) => {
    test.setTimeout(300000);

    // 1. Open the sidebar.
    await page.getByRole('tab', { name: 'Clusters' }).click();
    const sidebar = page.locator('#clustermgr-sidebar');
    await expect(sidebar).toBeVisible();
    await expect(sidebar.locator('.cm-ConnectionState')).toHaveAttribute(
      'data-connected',
      'true'
    );

    // 2. New Cluster: the dialog, with the "local" template; remember the
    //    id the server answers with.
    await sidebar.getByRole('button', { name: 'New Cluster' }).click();
    const dialog = page.locator('.cm-FormDialog');
    await dialog.getByRole('radio', { name: /^local Local/ }).check();
    const created = page.waitForResponse(
      response =>
        response.request().method() === 'POST' &&
        new URL(response.url()).pathname.endsWith('/clustermgr/api/clusters')
    );
    await dialog.getByRole('button', { name: 'Create' }).click();
    const response = await created;
    await expect(dialog).toHaveCount(0);
    expect(response.status()).toBe(202);
    const { id, status } = (await response.json()) as {
      id: string;
      status: string;
    };
    expect(status).toBe('pending');

    const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);
    await expect(card).toBeVisible();
    // Wait on the server (fails fast, with its error and events, if the
    // cluster fails), then check that the card shows it.
    await waitForCluster(page, id);
    await expect(card.locator('.cm-StatusBadge')).toHaveText('running');
    await expect(card.locator('.cm-ClusterCard-workersRunning')).not.toHaveText(
      '0'
    );
    await expect(card.locator('.cm-ClusterCard-memory')).toHaveText(
      /^\d+(\.\d+)? [KMGT]iB$/
    );
    const address = (
      await card.locator('.cm-ClusterCard-address').innerText()
    ).trim();
    expect(address).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/); // every cluster the server starts uses TLS
    const workersInCard = Number(
      await card.locator('.cm-ClusterCard-workersRunning').innerText()
    );

    await sidebar.screenshot({ path: test.info().outputPath('sidebar.png') });

    // 3. A new notebook with a Python 3 kernel.
    const name = await page.notebook.createNew('skeleton.ipynb', {
      kernel: 'python3'
    });
    expect(name).toBe('skeleton.ipynb');
    const cellsBefore = await getSources(page);

    // 4. Drag the card onto the notebook's first cell, which is empty: the
    //    code goes into that cell (no new cell below an empty one).
    const clusterName = (await card
      .locator('.cm-ClusterCard-name')
      .textContent())!;
    expect(cellsBefore).toEqual(['']);
    const from = await card.locator('.cm-ClusterCard-name').boundingBox();
    const target = page
      .locator('.jp-NotebookPanel .jp-Notebook .jp-Cell')
      .first();
    const to = await target.boundingBox();
    expect(from).not.toBeNull();
    expect(to).not.toBeNull();
    await page.mouse.move(
      from!.x + from!.width / 2,
      from!.y + from!.height / 2
    );
    await page.mouse.down();
    await page.mouse.move(from!.x + from!.width / 2 + 20, from!.y + 20, {
      steps: 5
    });
    await page.mouse.move(to!.x + to!.width / 2, to!.y + to!.height / 2, {
      steps: 15
    });
    await page.mouse.up();

    // A cluster with TLS: the cell gets its Security from the server (no manual step).
    expect(address).toMatch(/^tls:\/\//);
    const expected = clientCellText({ name: clusterName });
    expect(expected).toContain(`get_cluster(${JSON.stringify(clusterName)})`);
    await expect.poll(async () => await getSources(page)).toEqual([expected]);
    const clientIndex = 0;
    // What the user sees in the editor is the same text.
    const editor = page
      .locator('.jp-NotebookPanel .jp-Cell')
      .nth(clientIndex)
      .locator('.jp-InputArea-editor .cm-line');
    await expect(editor).toHaveText(expected.split('\n'));

    // 5. Execute it, then ask the scheduler for its workers.
    expect(await page.notebook.runCell(clientIndex)).toBe(true);
    const clientOutput = await page.notebook.getCellTextOutput(clientIndex);
    expect((clientOutput ?? []).join('\n')).not.toMatch(/Error|Traceback/);
    // Its last line shows the cluster, with the dashboard link (through the server)
    const link = page
      .locator('.jp-NotebookPanel .jp-Cell')
      .nth(clientIndex)
      .locator('.jp-OutputArea a[href*="/status"]')
      .first();
    await expect(link).toBeVisible({ timeout: 60000 });
    expect(await link.getAttribute('href')).toMatch(/^\/clustermgr\//);

    expect(
      await page.notebook.addCell(
        'code',
        'len(client.scheduler_info()["workers"])'
      )
    ).toBe(true);
    const workersIndex = (await getSources(page)).length - 1;
    expect(await page.notebook.runCell(workersIndex)).toBe(true);
    const output = await page.notebook.getCellTextOutput(workersIndex);
    expect(output).not.toBeNull();
    const workers = Number(output!.join('').trim());
    expect(workers).toBeGreaterThanOrEqual(1);
    expect(workers).toBe(workersInCard);

    // 6. The keyboard/button path: "Insert client" runs the
    //    clustermgr:insert-client-cell command: into the active cell when it
    //    is empty (running the last cell left a new empty one), else below it.
    await page.notebook.selectCells(workersIndex);
    const countBefore = (await getSources(page)).length;
    await card.getByRole('button', { name: /^Insert client code/ }).click();
    await expect
      .poll(async () => (await getSources(page)).length)
      .toBe(countBefore + 1);
    expect((await getSources(page))[workersIndex + 1]).toBe(expected);
    expect((await getSources(page)).filter(s => s === expected)).toHaveLength(
      2
    );
    const emptyIndex = (await getSources(page)).indexOf('');
    if (emptyIndex >= 0) {
      // And into an empty active cell, the code goes into that cell
      await page.notebook.selectCells(emptyIndex);
      const count = (await getSources(page)).length;
      await card.getByRole('button', { name: /^Insert client code/ }).click();
      await expect
        .poll(async () => (await getSources(page))[emptyIndex])
        .toBe(expected);
      expect((await getSources(page)).length).toBe(count);
    }

    // 7. Shut the cluster down (confirmed): the card leaves the list.
    await card.getByRole('button', { name: /^Shut down/ }).click();
    await page
      .locator('.jp-Dialog')
      .getByRole('button', { name: 'Shut down' })
      .click();
    await expect(card).toHaveCount(0, { timeout: CLUSTER_TIMEOUT });
  });
});
