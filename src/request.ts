import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IErrorBody } from './types';
import { trans } from './i18n';

/**
 * The path of the REST API below the server's base URL.
 */
export const API_PATH = 'clustermgr/api';

/**
 * An error answered by the cluster manager (or a failed request).
 *
 * `status` is the HTTP status (0 when the server could not be reached),
 * `code`, `message` and `field` come from the server's JSON error body
 * `{code, message, field?}`.
 */
export class ClusterManagerError extends Error {
  constructor(options: ClusterManagerError.IOptions) {
    super(options.message);
    this.name = 'ClusterManagerError';
    this.status = options.status;
    this.code = options.code;
    this.field = options.field ?? null;
  }

  /**
   * The HTTP status, or 0 for a network failure.
   */
  readonly status: number;

  /**
   * The machine-readable error code (`invalid`, `not_found`, `conflict`, ...).
   */
  readonly code: string;

  /**
   * The offending request field, such as `spec.groups[0].memory`, if any.
   */
  readonly field: string | null;
}

export namespace ClusterManagerError {
  export interface IOptions {
    status: number;
    code: string;
    message: string;
    field?: string | null;
  }

  /**
   * Build an error from a non-OK response.
   */
  export async function fromResponse(
    response: Response
  ): Promise<ClusterManagerError> {
    const text = await response.text().catch(() => '');
    let body: Partial<IErrorBody> | null = null;
    try {
      body = text ? (JSON.parse(text) as Partial<IErrorBody>) : null;
    } catch {
      body = null;
    }
    if (body && typeof body === 'object' && typeof body.message === 'string') {
      return new ClusterManagerError({
        status: response.status,
        code: typeof body.code === 'string' ? body.code : 'error',
        message: body.message,
        field: typeof body.field === 'string' ? body.field : null
      });
    }
    return new ClusterManagerError({
      status: response.status,
      code: 'http_error',
      message: `${response.status} ${response.statusText || 'error'}${
        text && text.length < 200 ? `: ${text}` : ''
      }`
    });
  }
}

/**
 * Call the cluster manager's REST API.
 *
 * @param endPoint path below `clustermgr/api`, e.g. `clusters/abc`.
 * @param init fetch options; a plain object `body` is not accepted, pass a
 *   JSON string (see `jsonBody`).
 * @param settings server settings (defaults to the page's settings).
 * @returns the decoded JSON body, or `undefined` for an empty answer.
 * @throws ClusterManagerError on network failures and non-2xx answers.
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_PATH, endPoint);
  const headers = new Headers(init.headers ?? {});
  if (init.body !== undefined && !headers.has('Content-Type')) {
    headers.set('Content-Type', 'application/json');
  }

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      url,
      { ...init, headers },
      settings
    );
  } catch (error) {
    throw new ClusterManagerError({
      status: 0,
      code: 'network',
      message: trans.__(
        'Cannot reach the Jupyter server: %1',
        (error as Error)?.message ?? String(error)
      )
    });
  }

  if (!response.ok) {
    throw await ClusterManagerError.fromResponse(response);
  }

  const text = await response.text();
  if (!text) {
    return undefined as unknown as T;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ClusterManagerError({
      status: response.status,
      code: 'bad_response',
      message: trans.__(
        'The server sent an answer that is not JSON: %1',
        text.slice(0, 100)
      )
    });
  }
}

/**
 * Request options for a JSON body.
 */
export function jsonBody(method: string, body: unknown): RequestInit {
  return { method, body: JSON.stringify(body) };
}

/**
 * Any thrown value as a ClusterManagerError.
 */
export function asServerError(error: unknown): ClusterManagerError {
  return error instanceof ClusterManagerError
    ? error
    : new ClusterManagerError({
        status: 0,
        code: 'error',
        message: error instanceof Error ? error.message : String(error)
      });
}
