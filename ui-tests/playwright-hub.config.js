/**
 * Playwright configuration of the two-user JupyterHub test (hub/).
 *
 * The hub is not started here: ci/services.sh starts it as root for the test
 * run (ci/hub/start-hub.sh) and writes its URL below CLUSTERMGR_TEST_RUN_DIR.
 */
const base = require('./playwright.config');

module.exports = {
  ...base,
  testDir: './hub',
  outputDir: './test-results/hub',
  timeout: 900000,
  reporter: [['list']],
  webServer: undefined,
  // Every wait has its deadline under load (a click on something that never comes fails, not hangs).
  use: {
    ...base.use,
    baseURL: undefined,
    actionTimeout: 120000,
    navigationTimeout: 240000
  }
};
