/**
 * Whether a cluster's dashboard is served somewhere else than this server's
 * dashboard proxy (a dask-gateway cluster's dashboard route): the browser then
 * opens it in a tab of its own, at that address, instead of a JupyterLab tab
 * framing `clustermgr/dashboard/<id>/…`.
 */
export function opensElsewhere(
  dashboardUrl: string | null | undefined
): boolean {
  return !!dashboardUrl && !/(^|\/)clustermgr\/dashboard\//.test(dashboardUrl);
}
