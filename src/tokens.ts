/**
 * Command ids.
 */
export namespace CommandIDs {
  export const newCluster = 'clustermgr:new-cluster';
  export const showSidebar = 'clustermgr:show-sidebar';
  export const insertClientCell = 'clustermgr:insert-client-cell';
  export const openDashboard = 'clustermgr:open-dashboard';
  export const copyAddress = 'clustermgr:copy-address';
  export const scale = 'clustermgr:scale';
  export const adapt = 'clustermgr:adapt';
  export const editSpec = 'clustermgr:edit-spec';
  export const shutdown = 'clustermgr:shutdown';
  export const showEvents = 'clustermgr:show-events';
  export const openPlot = 'clustermgr:open-plot';
  export const listPlots = 'clustermgr:list-plots';
  export const attachCluster = 'clustermgr:attach-cluster';
}

/**
 * The id of the extension's plugin (and of its settings).
 */
export const PLUGIN_ID = 'clustermgr-lab:plugin';
