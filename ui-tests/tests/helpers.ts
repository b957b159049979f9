/**
 * Helpers for tests against the real server (real Dask processes).
 */
import './appstart';
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

// Clusters start real Dask processes on a busy 2-core machine (30-90 s at load 10).
export const CLUSTER_TIMEOUT = 180000;

/**
 * Create a cluster through the API; resolves with its JSON (pending).
 */
export async function createCluster(
  page: IJupyterLabPageFixture,
  body: Record<string, unknown>
): Promise<any> {
  const response = await page.request.post('/clustermgr/api/clusters', {
    data: body
  });
  expect(response.status()).toBe(202);
  return response.json();
}

/**
 * Wait until the server reports the cluster running with `workers` workers
 * connected; fail at once with its error and events if it fails.
 */
export async function waitForCluster(
  page: IJupyterLabPageFixture,
  id: string,
  check: (cluster: any) => boolean = c =>
    c.status === 'running' && c.workers?.running > 0
): Promise<any> {
  const deadline = Date.now() + CLUSTER_TIMEOUT;
  let last: any = null;
  while (Date.now() < deadline) {
    const response = await page.request.get(`/clustermgr/api/clusters/${id}`);
    last = await response.json();
    if (check(last)) {
      return last;
    }
    if (last.status === 'failed') {
      const events = await page.request
        .get(`/clustermgr/api/clusters/${id}/events`)
        .then(r => r.json())
        .catch(e => String(e));
      throw new Error(
        `cluster ${id} failed: ${last.error}\nevents: ${JSON.stringify(events, null, 1)}`
      );
    }
    await page.waitForTimeout(500);
  }
  throw new Error(
    `cluster ${id}: condition not met after ${CLUSTER_TIMEOUT} ms: ${JSON.stringify(last)}`
  );
}

/**
 * Shut a cluster down through the API and wait until it has left the list.
 */
export async function removeCluster(
  page: IJupyterLabPageFixture,
  id: string
): Promise<void> {
  await page.request.delete(`/clustermgr/api/clusters/${id}`);
  await expect
    .poll(
      async () =>
        (await page.request.get(`/clustermgr/api/clusters/${id}`)).status(),
      {
        timeout: CLUSTER_TIMEOUT
      }
    )
    .toBe(404);
}

/**
 * The sources of the current notebook's cells, from its model.
 */
export async function getSources(
  page: IJupyterLabPageFixture
): Promise<string[]> {
  return page.evaluate(() => {
    const app = (window as any).jupyterapp;
    const panel = app.shell.currentWidget;
    const cells = panel?.content?.model?.sharedModel?.cells ?? [];
    return cells.map((cell: any) => cell.getSource() as string);
  });
}

/**
 * A local cluster of one small worker, not adaptive: the body that creates it.
 */
export function smallCluster(name: string): Record<string, unknown> {
  return {
    name,
    template: 'local',
    adapt: null,
    spec: {
      groups: [{ name: 'default', count: 1, threads: 1, memory: '512 MiB' }]
    }
  };
}

/**
 * Run code in a new cell of the current notebook; resolves with its text output.
 */
export async function runInNewCell(
  page: IJupyterLabPageFixture,
  code: string
): Promise<string> {
  await page.notebook.addCell('code', code);
  const index = (await page.notebook.getCellCount()) - 1;
  expect(await page.notebook.runCell(index)).toBe(true);
  return ((await page.notebook.getCellTextOutput(index)) ?? []).join('').trim();
}

/**
 * The code of an inserted Client cell (src/clientcode.ts): it lets go of the
 * client and the cluster object an earlier inserted cell made, then makes the
 * cluster's `distributed` Cluster object by the name the card shows and a
 * Client of it, and shows the cluster (its last line).
 */
export function clientCellText(target: { name: string }): string {
  return [
    'import clustermgr_lab',
    'from distributed import Client',
    'if isinstance(globals().get("client"), Client):',
    '    client.close()  # the client of a cell inserted before',
    'if isinstance(globals().get("cluster"), clustermgr_lab.JupyterServerCluster):',
    '    cluster.close()  # lets go of the cluster of a cell inserted before; it keeps running',
    `cluster = clustermgr_lab.get_cluster(${JSON.stringify(target.name)})`,
    'client = Client(cluster)',
    'cluster'
  ].join('\n');
}

/**
 * Where a screenshot for the documentation goes: `docs/<name>` when the run
 * is asked for them (`DOCS_SCREENSHOTS=1`), else the test's own output
 * folder (so an ordinary run leaves the checkout as it was).
 */
export function docsScreenshot(
  info: { outputPath: (...parts: string[]) => string },
  name: string
): string {
  return process.env.DOCS_SCREENSHOTS
    ? `${__dirname}/../../docs/${name}`
    : info.outputPath(name);
}
