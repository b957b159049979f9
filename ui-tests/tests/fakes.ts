/**
 * A fake clustermgr server inside the browser (page.route + routeWebSocket),
 * for tests that need exact data or server answers that are hard to provoke.
 */
import './appstart';
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Locator, Route, WebSocketRoute } from '@playwright/test';

export const STREAM = /\/clustermgr\/api\/stream(\?.*)?$/;
export const LIST = /\/clustermgr\/api\/clusters(\?.*)?$/;
export const ONE = /\/clustermgr\/api\/clusters\/([^/?]+)(\?.*)?$/;
export const TEMPLATES = /\/clustermgr\/api\/templates(\?.*)?$/;

export const GiB = 2 ** 30;

/**
 * Two groups: 2 CPU workers and a GPU worker (the `gpu` template's spec).
 */
export const CPU_AND_GPU_SPEC = {
  groups: [
    {
      name: 'cpu',
      count: 2,
      threads: 2,
      memory: 4 * GiB,
      gpus: 0,
      resources: {}
    },
    {
      name: 'gpu',
      count: 1,
      threads: 4,
      memory: 16 * GiB,
      gpus: 1,
      resources: {}
    }
  ]
};

/**
 * What local processes allow (the API's `capabilities` of the `local` backend).
 */
export const LOCAL_CAPABILITIES = {
  can_scale: true,
  can_stop: true,
  multiple_groups: true,
  readoptable: true,
  runs_processes_here: true
};

/**
 * What a cluster started elsewhere allows (attached or discovered: `external`).
 */
export const EXTERNAL_CAPABILITIES = {
  can_scale: false,
  can_stop: false,
  multiple_groups: false,
  readoptable: false,
  runs_processes_here: false
};

/**
 * What batch jobs allow: their workers run on other hosts.
 */
export const BATCH_CAPABILITIES = {
  ...LOCAL_CAPABILITIES,
  runs_processes_here: false
};

/**
 * A cluster run by a distributed Cluster class (backend `cluster-class`):
 * one group, scaled by count, its shape set by the class's arguments.
 */
export const CLUSTER_CLASS_CAPABILITIES = {
  ...BATCH_CAPABILITIES,
  multiple_groups: false,
  readoptable: false,
  exact_retire: false,
  editable_spec: false,
  enforces_tls: false,
  reasons: {
    multiple_groups: 'a Cluster class runs one kind of worker',
    editable_spec: 'set by the Cluster class arguments in the template'
  }
};

export function fakeCluster(
  id: string,
  overrides: Record<string, unknown> = {}
): Record<string, any> {
  return {
    id,
    name: `Fake ${id}`,
    template: 'local',
    backend: 'local',
    status: 'running',
    error: null,
    scheduler_address: 'tcp://127.0.0.1:1',
    dashboard_url: null,
    spec: {
      groups: [
        {
          name: 'default',
          count: 1,
          threads: 1,
          memory: GiB,
          gpus: 0,
          resources: {}
        }
      ]
    },
    workers: {
      requested: 1,
      running: 1,
      pending: 0,
      pending_reasons: {},
      waiting: [],
      stopping: 0,
      groups: [
        {
          name: 'default',
          requested: 1,
          running: 1,
          pending: 0,
          pending_reasons: {},
          error: null
        }
      ]
    },
    resources: { cores: 1, memory: GiB, gpus: 0 },
    adapt: null,
    options: {},
    last_decision: null,
    created: '2026-01-01T00:00:00+00:00',
    capabilities: LOCAL_CAPABILITIES,
    ...overrides
  };
}

export const TEMPLATE_LIST = [
  {
    name: 'local',
    description:
      'Local processes sized from this machine: one thread per worker',
    backend: 'local',
    spec: {
      groups: [
        {
          name: 'default',
          count: 2,
          threads: 1,
          memory: 2 * GiB,
          gpus: 0,
          resources: {}
        }
      ]
    },
    adapt: null,
    user_options: [],
    capabilities: LOCAL_CAPABILITIES
  },
  {
    name: 'local-adaptive',
    description: 'Local processes that grow with the load (0 to 4 workers)',
    backend: 'local',
    spec: {
      groups: [
        {
          name: 'default',
          count: 0,
          threads: 1,
          memory: 2 * GiB,
          gpus: 0,
          resources: {}
        }
      ]
    },
    adapt: { minimum: 0, maximum: 4, unit: 'workers' },
    user_options: [],
    capabilities: LOCAL_CAPABILITIES
  },
  {
    name: 'gpu',
    description: 'CPU workers and a GPU worker',
    backend: 'local',
    spec: CPU_AND_GPU_SPEC,
    adapt: null,
    user_options: [],
    capabilities: LOCAL_CAPABILITIES
  }
];

/**
 * The limits the fake templates answer carries.
 */
export const LIMITS = {
  max_workers: 8,
  max_clusters: 8,
  machine: { cores: 16, memory: 64 * GiB }
};

export interface IFakeServer {
  sockets: WebSocketRoute[];
  /** Requests other than GET of the list/templates: [method, path, body]. */
  calls: Array<{ method: string; path: string; body: any }>;
  /** GETs of the cluster list. */
  listCalls: number;
  /** While true, new stream connections are closed at once. */
  down: boolean;
  /** Send a stream message on the newest socket (seq is added). */
  send(message: Record<string, unknown>): void;
}

/**
 * Answer the stream with a snapshot of `clusters`, the templates with
 * TEMPLATE_LIST, and every change with `onChange` (default: 202 + the cluster).
 */
export async function fakeServer(
  page: IJupyterLabPageFixture,
  clusters: Array<Record<string, unknown>>,
  onChange?: (route: Route, method: string, body: any) => Promise<void> | void
): Promise<IFakeServer> {
  let seq = 1;
  const server: IFakeServer = {
    sockets: [],
    calls: [],
    listCalls: 0,
    down: false,
    send(message) {
      seq += 1;
      server.sockets[server.sockets.length - 1].send(
        JSON.stringify({ ...message, seq })
      );
    }
  };
  await page.routeWebSocket(STREAM, ws => {
    if (server.down) {
      void ws.close({ code: 1011, reason: 'down' });
      return;
    }
    server.sockets.push(ws);
    seq = 1;
    ws.send(JSON.stringify({ type: 'snapshot', seq, clusters }));
  });
  await page.route(TEMPLATES, route =>
    route.fulfill({ json: { templates: TEMPLATE_LIST, limits: LIMITS } })
  );
  const handle = async (route: Route) => {
    const request = route.request();
    const method = request.method();
    if (method === 'GET') {
      server.listCalls += 1;
      return route.fulfill({ json: { clusters } });
    }
    const body = request.postData() ? JSON.parse(request.postData()!) : null;
    server.calls.push({ method, path: new URL(request.url()).pathname, body });
    if (onChange) {
      return onChange(route, method, body);
    }
    return route.fulfill({ status: 202, json: clusters[0] ?? {} });
  };
  await page.route(LIST, handle);
  await page.route(ONE, handle);
  return server;
}

export async function openSidebar(
  page: IJupyterLabPageFixture
): Promise<Locator> {
  await page.getByRole('tab', { name: 'Clusters' }).click();
  const sidebar = page.locator('#clustermgr-sidebar');
  await expect(sidebar).toBeVisible();
  return sidebar;
}

/**
 * The error notifications on screen.
 */
export function errorToasts(page: IJupyterLabPageFixture): Locator {
  return page.locator('.jp-Notification-Toast-error .jp-toast-message');
}

/**
 * Run a command from the palette: type `query`, click the item `label`.
 * The modal palette may close when focus moves: retry.
 */
export async function fromPalette(
  page: IJupyterLabPageFixture,
  query: string,
  label: string
): Promise<void> {
  const palette = page.locator('#command-palette');
  await expect(async () => {
    if (!(await palette.locator('input').isVisible())) {
      await page.evaluate(() =>
        (window as any).jupyterapp.commands.execute(
          'apputils:activate-command-palette'
        )
      );
    }
    await palette.locator('input').fill(query, { timeout: 2000 });
    await palette
      .locator('.lm-CommandPalette-item', { hasText: label })
      .first()
      .click({ timeout: 2000 });
  }).toPass({ timeout: 30000 });
}
