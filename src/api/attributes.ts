// What an authorizer is asked about a request (k8s.io/apiserver/pkg/authorization/authorizer
// Attributes): the same attributes whether the apiserver's own filter asks, a SubjectAccessReview,
// RBAC evaluated by Levee, a rule, or the Forbidden Status that refuses the request.

/** authorizer.Attributes of a resource request. */
export interface ResourceAttributes {
  verb: string;
  group: string;
  version?: string | undefined;
  resource: string;
  subresource?: string | undefined;
  namespace: string;
  name: string;
  /**
   * The request's fieldSelector and labelSelector as sent, for the verbs the apiserver authorizes
   * with selectors (RequestInfo.fieldSelector, labelSelector); empty or absent for none. The Node
   * authorizer allows a kubelet's list and watch of pods only with its own spec.nodeName.
   */
  fieldSelector?: string | undefined;
  labelSelector?: string | undefined;
}

/** authorizer.Attributes of a request for a path that is not an API resource (/debug/levee/...). */
export interface NonResourceAttributes {
  verb: string;
  path: string;
}

export type Attributes = ResourceAttributes | NonResourceAttributes;

export function isResourceRequest(attrs: Attributes): attrs is ResourceAttributes {
  return 'resource' in attrs;
}
