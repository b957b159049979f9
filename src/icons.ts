import { LabIcon } from '@jupyterlab/ui-components';

/**
 * Three linked nodes: a scheduler and its workers. Uses the theme's icon
 * colour classes, so it follows light and dark themes.
 */
const clusterSvg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M11.1 7.6h1.8v3.1h-1.8zM6.9 14.1l3.6-2.4 1 1.5-3.6 2.4zM12.5 13.2l1-1.5 3.6 2.4-1 1.5z"/>
    <circle cx="12" cy="5" r="3"/>
    <circle cx="5" cy="17.5" r="3"/>
    <circle cx="19" cy="17.5" r="3"/>
  </g>
</svg>`;

export const clusterIcon = new LabIcon({
  name: 'clustermgr-lab:cluster',
  svgstr: clusterSvg
});
