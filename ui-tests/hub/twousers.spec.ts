/**
 * Two users under a real JupyterHub (ci/hub/start-hub.sh: PAM users alice and
 * bob, LocalProcessSpawner, configurable-http-proxy): alice creates a cluster
 * from the sidebar through the hub and computes on it from a notebook; bob, a
 * process with bob's uid (ci/hub/other_user_probe.py under runuser), gets
 * nothing from it: no Client (plain or TLS), no dashboard, none of her files
 * or sockets; bob's server lists none of her clusters and the hub refuses his
 * requests to her server; her cluster keeps its workers and computes right.
 */
import {
  Browser,
  BrowserContext,
  expect,
  Locator,
  Page,
  test
} from '@playwright/test';
import { execFile, execFileSync } from 'child_process';
import { promisify } from 'util';
import * as fs from 'fs';
import * as path from 'path';

const REPO = path.resolve(__dirname, '..', '..');
const RUN_DIR = process.env.CLUSTERMGR_TEST_RUN_DIR ?? '';
const STATE = path.join(RUN_DIR, 'hub');
const PYTHON =
  process.env.CLUSTERMGR_HUB_PYTHON ??
  path.join(REPO, '.venv', 'bin', 'python');
const SERVER_TIMEOUT = 240000; // a single-user server's start, under load
const CLUSTER_TIMEOUT = 120000;
const NAME = `alice-${Date.now().toString(36)}`;

function hubFile(name: string): string {
  const file = path.join(STATE, name);
  if (!RUN_DIR || !fs.existsSync(file)) {
    throw new Error(
      `no JupyterHub of this run (${file} missing): run through make test or make ui-test, ` +
        'which start it with ci/services.sh (ci/hub/start-hub.sh RUN_DIR, as root)'
    );
  }
  return fs.readFileSync(file, 'utf-8').trim();
}

/**
 * Log in through the hub's form; resolves once the hub has started the user's
 * server and let the browser in, and, with `lab`, once JupyterLab runs.
 */
async function logIn(
  browser: Browser,
  hub: string,
  user: string,
  lab: boolean
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${hub}/hub/login`);
  await page.locator('#username_input').fill(user);
  await page.locator('#password_input').fill(hubFile('password'));
  await page.locator('#login_submit').click();
  await page.waitForURL(`${hub}/user/${user}/lab**`, {
    timeout: SERVER_TIMEOUT,
    waitUntil: lab ? 'load' : 'commit'
  });
  if (lab) {
    await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
      timeout: SERVER_TIMEOUT
    });
  } else {
    await page.goto('about:blank'); // the server's cookie is set; its JupyterLab is not needed
  }
  return { context, page };
}

/**
 * Replace the text of the notebook's cell `index`, run it, and resolve with its text output.
 */
async function runCell(
  page: Page,
  index: number,
  code: string | null
): Promise<string> {
  const cell = page
    .locator('.jp-NotebookPanel .jp-Notebook .jp-Cell')
    .nth(index);
  await cell.locator('.cm-content').click();
  if (code !== null) {
    await page.keyboard.press('Control+A');
    await page.keyboard.insertText(code);
  }
  await page.keyboard.press('Shift+Enter');
  await expect(cell.locator('.jp-InputArea-prompt')).toHaveText(/\[\d+\]:/, {
    timeout: CLUSTER_TIMEOUT
  });
  const output = await cell.locator('.jp-OutputArea-output').allInnerTexts();
  return output.join('').trim();
}

const COMPUTE = [
  'import json',
  'squares = client.map(lambda x: x * x, range(100))',
  'total = client.submit(sum, squares).result()',
  'print(json.dumps({"total": total, "workers": sorted(client.scheduler_info()["workers"])}))'
].join('\n');

async function compute(
  page: Page,
  index: number
): Promise<{ total: number; workers: string[] }> {
  const output = await runCell(page, index, COMPUTE);
  return JSON.parse(output.split('\n').pop() ?? '');
}

/**
 * Open the Clusters sidebar (the tab toggles it: clicked only while it is closed).
 */
async function openSidebar(page: Page): Promise<Locator> {
  const sidebar = page.locator('#clustermgr-sidebar');
  if (!(await sidebar.isVisible())) {
    await page.getByRole('tab', { name: 'Clusters' }).click();
  }
  await expect(sidebar).toBeVisible();
  return sidebar;
}

test('two users under JupyterHub: alice’s cluster is hers alone', async ({
  browser
}) => {
  test.setTimeout(900000);
  const hub = hubFile('url');

  // Given alice and bob, logged in through the hub (their servers start side by side)
  const bobLogin = logIn(browser, hub, 'bob', false);
  const alice = await logIn(browser, hub, 'alice', true);
  const bob = await bobLogin;

  // ...alice with a cluster made in her sidebar
  const page = alice.page;
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  await dialog.getByLabel('Name', { exact: true }).fill(NAME);
  await dialog.getByLabel('Number of workers, group 1').fill('2');
  await dialog.getByLabel('Threads (cores) per worker, group 1').fill('1');
  await dialog
    .getByLabel('Memory per worker, e.g. 4 GiB, group 1')
    .fill('512 MiB');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog).toHaveCount(0);
  const card = sidebar.locator('.cm-ClusterCard', { hasText: NAME });
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '2 running, 0 pending',
    { timeout: CLUSTER_TIMEOUT }
  );
  const id = (await card.getAttribute('data-cluster-id')) ?? '';
  expect(id).not.toBe('');

  // When she computes on it from a notebook, with the client cell the sidebar inserts
  await page
    .locator('.jp-LauncherCard[data-category="Notebook"]')
    .first()
    .click();
  await expect(
    page.locator(
      '.jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status="idle"]'
    )
  ).toHaveCount(1, { timeout: SERVER_TIMEOUT });
  await card
    .getByRole('button', { name: `Insert client code for ${NAME}` })
    .click();
  const cells = page.locator('.jp-NotebookPanel .jp-Notebook .jp-Cell');
  await expect(cells).toHaveCount(1); // the new notebook's empty cell holds it
  await runCell(page, 0, null);
  const before = await compute(page, 1);
  expect(before.total).toBe(328350);
  expect(before.workers).toHaveLength(2);

  // Then bob's server lists none of alice's clusters
  const bobList = await bob.context.request.get(
    `${hub}/user/bob/clustermgr/api/clusters`
  );
  expect(bobList.status()).toBe(200);
  expect((await bobList.json()).clusters).toEqual([]);

  // ...and the hub refuses bob's requests to alice's server: her JupyterLab, her API, a DELETE
  const lab = await bob.page.goto(`${hub}/user/alice/lab`);
  expect(lab?.status()).toBe(403);
  await expect(bob.page.locator('#jp-main-dock-panel')).toHaveCount(0);
  for (const url of [
    `${hub}/user/alice/clustermgr/api/clusters`,
    `${hub}/user/alice/clustermgr/api/clusters/${id}`,
    `${hub}/user/alice/api/contents`
  ]) {
    const answer = await bob.context.request.get(url);
    expect.soft(answer.status(), `bob: GET ${url}`).toBe(403);
    expect.soft(await answer.text(), `bob: GET ${url}`).not.toContain(NAME);
  }
  const removal = await bob.context.request.delete(
    `${hub}/user/alice/clustermgr/api/clusters/${id}`,
    { maxRedirects: 0 }
  );
  expect
    .soft(removal.status(), 'bob: DELETE alice’s cluster')
    .toBeGreaterThanOrEqual(300);

  // ...and, as a process with bob's uid, every attempt on her cluster is refused
  const probe = await promisify(execFile)(
    PYTHON,
    [
      path.join(REPO, 'ci', 'hub', 'other_user_probe.py'),
      '--as',
      'bob',
      '--user-dir',
      path.join(STATE, 'users', 'alice'),
      '--cluster',
      id
    ],
    { env: { ...process.env, PYTHONPATH: REPO }, timeout: 600000 }
  );
  const report = JSON.parse(probe.stdout);
  await test.info().attach('bob-probe.json', {
    body: probe.stdout,
    contentType: 'application/json'
  });
  console.log(
    `bob's ${Object.keys(report.attempts).length} attempts: ` +
      Object.entries(report.attempts)
        .map(
          ([name, outcome]) =>
            `${name}: ${(outcome as { detail: string }).detail.slice(0, 80)}`
        )
        .join('\n  ')
  );
  const bobUid = Number(
    execFileSync('id', ['-u', 'bob'], { encoding: 'utf-8' })
  );
  expect(report.uid).toBe(bobUid);
  const targets = report.targets;
  // What must have been tried: her store, launcher socket, logs and certificates, on a TLS scheduler.
  expect
    .soft(targets.scheduler_address, 'alice’s scheduler speaks TLS')
    .toMatch(/^tls:\/\//);
  expect
    .soft(targets.files.filter((f: string) => f.endsWith('.sqlite3')))
    .not.toEqual([]);
  expect
    .soft(targets.files.filter((f: string) => f.endsWith('.log')))
    .not.toEqual([]);
  expect
    .soft(
      targets.files.filter((f: string) => f.endsWith('.pem')),
      'alice’s certificates'
    )
    .not.toEqual([]);
  expect
    .soft(targets.sockets.filter((f: string) => f.endsWith('launcher.sock')))
    .not.toEqual([]);
  for (const [attempt, outcome] of Object.entries(report.attempts)) {
    const { refused, detail } = outcome as { refused: boolean; detail: string };
    expect.soft(refused, `bob: ${attempt} → ${detail}`).toBe(true);
  }

  // Then alice's cluster is unaffected: the same workers, right results
  await expect(card.locator('.cm-ClusterCard-workers')).toHaveText(
    '2 running, 0 pending'
  );
  const after = await compute(page, 2);
  expect(after).toEqual(before);

  // Cleanup through the UI (the hub's stop would stop it too: on_shutdown = stop)
  await card.getByRole('button', { name: `Shut down ${NAME}` }).click();
  await page
    .locator('.jp-Dialog')
    .getByRole('button', { name: 'Shut down' })
    .click();
  await expect(card).toHaveCount(0, { timeout: CLUSTER_TIMEOUT });
  await bob.context.close();
  await alice.context.close();
});
