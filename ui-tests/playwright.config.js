/**
 * Playwright configuration for the galata UI tests.
 *
 * Uses the system's Debian Chromium (never `playwright install`), keeps every
 * connection on 127.0.0.1, and starts JupyterLab itself.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

// UI_TEST_PORT lets several checkouts run their UI tests side by side.
const port = process.env.UI_TEST_PORT || '8888';
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
