/**
 * Playwright configuration for the galata UI tests.
 *
 * Uses the system's Debian Chromium (never `playwright install`), keeps every
 * connection on 127.0.0.1, and starts JupyterLab itself.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

// The server's port: UI_TEST_PORT (ci/ui_shards.py picks a free one per shard), else a free port picked here,
// never a fixed one (`make lab` may be using 8888). It is put back into the environment, so Playwright's workers
// (which load this file again) and the server (jupyter_server_test_config.py) get the same one.
const { execFileSync } = require('child_process');
if (!process.env.UI_TEST_PORT) {
  process.env.UI_TEST_PORT = execFileSync(
    process.env.PYTHON || 'python3',
    [
      '-c',
      "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    ],
    { encoding: 'utf-8' }
  ).trim();
}
const port = process.env.UI_TEST_PORT;
// ci/ui_shards.py runs Playwright shards side by side: each keeps its results and report apart.
const shard = process.env.UI_TEST_SHARD
  ? `-shard-${process.env.UI_TEST_SHARD}`
  : '';

module.exports = {
  ...baseConfig,
  // Clusters start real Dask processes: one test at a time, generous timeout.
  // The two-user JupyterHub test (hub/) has a configuration of its own: playwright-hub.config.js.
  testDir: './tests',
  workers: 1,
  timeout: 180000,
  // Assertions retry for 20 s, not Playwright's 5 s: on a loaded 2-core machine a pushed update can take longer.
  expect: { timeout: 20000 },
  retries: 0,
  reporter: [
    ['list'],
    ['html', { open: 'never', outputFolder: `playwright-report${shard}` }]
  ],
  outputDir: `test-results${shard}`,
  use: {
    ...baseConfig.use,
    browserName: 'chromium',
    baseURL: `http://127.0.0.1:${port}`,
    video: 'off',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1'
      ]
    }
  },
  webServer: {
    command: 'jlpm start',
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120000,
    reuseExistingServer: !process.env.CI,
    // SIGTERM, not Playwright's default SIGKILL: the server then stops its clusters
    // (on_shutdown = "stop" in jupyter_server_test_config.py) and leaves no process behind.
    gracefulShutdown: { signal: 'SIGTERM', timeout: 30000 }
  }
};
