import { Notification } from '@jupyterlab/apputils';

import { ClusterManagerError } from './request';

/**
 * The message of an error, as the server worded it.
 */
export function errorMessage(error: unknown): string {
  if (error instanceof ClusterManagerError) {
    return error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Report a failed action as a JupyterLab notification carrying the server's
 * message.
 */
export function notifyError(action: string, error: unknown): void {
  Notification.error(`${action}: ${errorMessage(error)}`, {
    autoClose: 10000
  });
}

/**
 * Run a server call; on failure notify and resolve with `null`.
 */
export async function tryRequest<T>(
  action: string,
  call: () => Promise<T>
): Promise<T | null> {
  try {
    return await call();
  } catch (error) {
    notifyError(action, error);
    return null;
  }
}
