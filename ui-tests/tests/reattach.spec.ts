/**
 * A cluster attached by address survives a real restart of the Jupyter
 * server. This spec runs a server of its own (its own port, one store across
 * the restart, the default on_shutdown "keep") beside the suite's, and a
 * scheduler and worker started outside any server.
 */
import { expect, test } from './fixtures';
import { ChildProcess, execFileSync, spawn } from 'child_process';
import { existsSync, mkdtempSync, readFileSync } from 'fs';
import { tmpdir } from 'os';
import * as path from 'path';

import { openSidebar } from './fakes';
import { CLUSTER_TIMEOUT, waitForCluster } from './helpers';

const PYTHON = process.env.PYTHON || 'python3';
const PORT = Number(
  execFileSync(PYTHON, [
    '-c',
    'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  ])
    .toString()
    .trim()
);
const BASE = `http://127.0.0.1:${PORT}`;
const place = mkdtempSync(
  path.join(
    process.env.CLUSTERMGR_TEST_RUN_DIR || tmpdir(),
    'clustermgr-ui-reattach-'
  )
);

// The kernels, sessions and terminals APIs are not tracked through galata's
// request routes: those fail the test while the server is stopped on purpose.
test.use({
  autoGoto: false,
  baseURL: BASE,
  kernels: null,
  sessions: null,
  terminals: null
});

let server: ChildProcess | null = null;
const outside: ChildProcess[] = [];
let address = '';

async function until(what: string, check: () => boolean | Promise<boolean>) {
  const deadline = Date.now() + 120000;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(`not after 120 s: ${what}`);
    }
    await new Promise(resolve => setTimeout(resolve, 250));
  }
}

/**
 * Start this spec's Jupyter server (the suite's configuration, this spec's
 * port and store) and wait until it answers.
 */
async function startServer(): Promise<void> {
  server = spawn(
    'jupyter',
    [
      'lab',
      '--config',
      path.join(__dirname, '..', 'jupyter_server_test_config.py'),
      `--ServerApp.port=${PORT}`,
      `--ClusterManager.store_path=${path.join(place, 'clusters.sqlite3')}`,
      `--ClusterManager.workdir=${path.join(place, 'clusters')}`,
      // the default, which the suite's configuration sets to "stop" (its tests leave nothing behind):
      // a clean stop leaves the clusters for the next server
      '--ClusterManager.on_shutdown=keep'
    ],
    { cwd: path.join(__dirname, '..'), stdio: 'ignore' }
  );
  await until('the server answers', async () => {
    try {
      return (await fetch(`${BASE}/clustermgr/api/clusters`)).ok;
    } catch {
      return false;
    }
  });
}

/**
 * Stop it as a user does (SIGTERM) and wait until it has ended.
 */
async function stopServer(): Promise<void> {
  const running = server;
  server = null;
  if (running && running.exitCode === null) {
    const ended = new Promise(resolve => running.once('exit', resolve));
    running.kill('SIGTERM');
    await ended;
  }
}

test.beforeAll(async () => {
  test.setTimeout(240000);
  // A scheduler and a worker started outside any Jupyter server
  const schedulerFile = path.join(place, 'outside-scheduler.json');
  outside.push(
    spawn(
      PYTHON,
      [
        '-m',
        'distributed.cli.dask_scheduler',
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--dashboard-address',
        '127.0.0.1:0',
        '--scheduler-file',
        schedulerFile
      ],
      { stdio: 'ignore' }
    )
  );
  await until('the outside scheduler', () => existsSync(schedulerFile));
  address = JSON.parse(readFileSync(schedulerFile, 'utf-8')).address;
  outside.push(
    spawn(
      PYTHON,
      [
        '-m',
        'distributed.cli.dask_worker',
        address,
        '--nthreads',
        '1',
        '--no-dashboard'
      ],
      { stdio: 'ignore' }
    )
  );
  await startServer();
});

test.afterAll(async () => {
  await stopServer();
  for (const process of outside.reverse()) {
    process.kill('SIGKILL');
  }
});

test('an attached cluster is attached again after a real server restart, its data never said gone', async ({
  page
}) => {
  test.setTimeout(420000);
  await page.goto();
  // Given a cluster attached by its address, its one worker seen by the sidebar
  const response = await page.request.post('/clustermgr/api/clusters', {
    data: { attach: address, name: 'outside' }
  });
  expect(response.status()).toBe(202);
  const { id } = await response.json();
  await waitForCluster(
    page,
    id,
    c => c.status === 'running' && c.workers?.running === 1
  );
  const sidebar = await openSidebar(page);
  const card = sidebar.locator(`.cm-ClusterCard[data-cluster-id="${id}"]`);
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '1 running, 0 pending',
    { timeout: CLUSTER_TIMEOUT }
  );

  // When the Jupyter server is stopped and started again
  await stopServer();
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Offline', {
    timeout: 30000
  });
  await startServer();

  // Then the same card is back, running with its worker, once the sidebar is live again
  await expect(sidebar.locator('.cm-ConnectionState')).toHaveText('Live', {
    timeout: CLUSTER_TIMEOUT
  });
  await expect(card.locator('.cm-StatusBadge')).toHaveText('running', {
    timeout: CLUSTER_TIMEOUT
  });
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '1 running, 0 pending',
    { timeout: CLUSTER_TIMEOUT }
  );
  // And nothing claims it, or its data, is gone
  await expect(sidebar.locator('.cm-GoneNotice')).toHaveCount(0);
  await expect(sidebar).not.toContainText('are gone');
  expect(outside.every(process => process.exitCode === null)).toBe(true);

  // (detached: the outside scheduler keeps running, the next start sees no cluster)
  await page.request.delete(`/clustermgr/api/clusters/${id}`);
});
