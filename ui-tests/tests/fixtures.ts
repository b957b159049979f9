/**
 * The `test` every spec uses: galata's, plus one automatic fixture that removes the clusters left behind by a
 * test that did not pass. A test that passes cleans up after itself (some check that it did); one that failed
 * or timed out half-way would otherwise leave a running cluster for the next specs, which would list one cluster
 * more than they expect and whose counts are off: one real failure would be followed by others.
 */
import './appstart';
import type { APIRequestContext } from '@playwright/test';
import { test as galataTest } from '@jupyterlab/galata';

export { expect, galata } from '@jupyterlab/galata';
export type { IJupyterLabPageFixture } from '@jupyterlab/galata';

// A failed test's clusters may still be starting real processes on a busy 2-core machine.
const REMOVAL_TIMEOUT = 120000;

async function clusterIds(api: APIRequestContext): Promise<string[]> {
  const response = await api.get('/clustermgr/api/clusters');
  if (!response.ok()) {
    return []; // a spec that stops the server, or a fake one: nothing to compare
  }
  const body = await response.json();
  return (body.clusters ?? []).map((c: { id: string }) => c.id);
}

export const test = galataTest.extend<{ clustersLeftByAFailure: void }>({
  clustersLeftByAFailure: [
    async ({ baseURL, playwright }, use, testInfo) => {
      const api = await playwright.request.newContext({ baseURL });
      const before = new Set(await clusterIds(api).catch(() => []));
      await use();
      try {
        if (testInfo.status === 'passed') {
          return;
        }
        const left = (await clusterIds(api)).filter(id => !before.has(id));
        for (const id of left) {
          await api.delete(`/clustermgr/api/clusters/${id}`);
        }
        const deadline = Date.now() + REMOVAL_TIMEOUT;
        let still = left;
        while (still.length && Date.now() < deadline) {
          await new Promise(resolve => setTimeout(resolve, 500));
          const listed = new Set(await clusterIds(api));
          still = still.filter(id => listed.has(id));
        }
        if (left.length) {
          const gone = left.filter(id => !still.includes(id));
          console.log(
            `[${testInfo.title}] removed the clusters it left: ${gone.join(', ') || 'none'}` +
              (still.length ? `; still listed: ${still.join(', ')}` : '')
          );
        }
      } catch (error) {
        console.log(
          `[${testInfo.title}] could not remove the clusters it left: ${error}`
        );
      } finally {
        await api.dispose();
      }
    },
    { auto: true, timeout: REMOVAL_TIMEOUT + 30000 }
  ]
});
