/**
 * What a cluster or template allows, read from its `capabilities` (never
 * from its backend's name).
 */
import { ICapabilities, ICluster, ITemplate } from './types';

/**
 * Everything allowed: what a server that does not send capabilities yet
 * allows its own clusters.
 */
export const FULL_CAPABILITIES: Readonly<ICapabilities> = {
  can_scale: true,
  can_stop: true,
  multiple_groups: true,
  readoptable: true,
  runs_processes_here: true,
  exact_retire: true,
  editable_spec: true,
  enforces_tls: true,
  reasons: {}
};

/**
 * The capabilities of a cluster or template (all allowed when not sent).
 */
export function capabilitiesOf(
  item: Pick<ICluster | ITemplate, 'capabilities'> | null | undefined
): ICapabilities {
  return { ...FULL_CAPABILITIES, ...(item?.capabilities ?? {}) };
}

/**
 * Whether the server only observes a cluster started elsewhere (attached or
 * discovered): it cannot stop it, so removing it only detaches it.
 */
export function onlyObserved(cluster: ICluster): boolean {
  return !capabilitiesOf(cluster).can_stop;
}

/**
 * Why a capability of a cluster or template is off (the server's words), or
 * null when it is on.
 */
export function offReason(
  item: Pick<ICluster | ITemplate, 'capabilities'> | null | undefined,
  capability: Exclude<keyof ICapabilities, 'reasons'>,
  fallback: string
): string | null {
  const capabilities = capabilitiesOf(item);
  if (capabilities[capability] !== false) {
    return null;
  }
  return capabilities.reasons?.[capability] ?? fallback;
}
