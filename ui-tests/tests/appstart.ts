/**
 * How long every spec waits for JupyterLab to start: galata's own waits give
 * up after 15 s, and on a shared 2-core machine under load a start can take a
 * minute. Imported (for this effect) by helpers.ts and fakes.ts, so by every spec.
 */
import { JupyterLabPage } from '@jupyterlab/galata';

/**
 * The longest wait for the app to start, or for its Launcher to show, in ms.
 */
export const APP_START_TIMEOUT = 300000;

// galata's waitForAppStarted and its default waitForApplication both call
// waitForCondition without a timeout; give them APP_START_TIMEOUT instead.
// A wait given a timeout of its own keeps it.
const waitForCondition = JupyterLabPage.prototype.waitForCondition;
JupyterLabPage.prototype.waitForCondition = function (
  condition: () => Promise<boolean> | boolean,
  timeout?: number
): Promise<void> {
  return waitForCondition.call(this, condition, timeout ?? APP_START_TIMEOUT);
};
