"""Kubernetes NetworkPolicy ingress, evaluated the obvious way (the API's documented
semantics, no CNI): which policies isolate a pod, and whether a caller reaches it on a port.
The lockdown tests ask it about the pods the overlays render; no cluster here enforces
policies, so this is what checks them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    """A pod as a policy sees it: its namespace's labels and its own."""

    namespace: str
    labels: dict[str, str]
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def namespace_label_set(self) -> dict[str, str]:
        # every namespace carries its name as this label (Kubernetes >= 1.21)
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A LabelSelector: every matchLabels pair and every matchExpressions term hold; an
    empty selector selects everything."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for term in selector.get("matchExpressions", []):
        key, operator, values = term["key"], term["operator"], term.get("values", [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


def _isolating(policies: list[dict], pod: Pod) -> list[dict]:
    return [
        p for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], pod.labels)
    ]  # fmt: skip


def isolated(policies: list[dict], pod: Pod) -> bool:
    """Whether some policy selects ``pod`` for ingress (then only what they allow reaches it)."""
    return bool(_isolating(policies, pod))


def _peer_admits(peer: dict, policy_namespace: str, caller: Pod) -> bool:
    if "ipBlock" in peer:
        return False  # callers here are pods, named by labels
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], caller.namespace_label_set()):
            return False
    elif caller.namespace != policy_namespace:
        return False  # a podSelector alone: the policy's own namespace
    return selects(peer.get("podSelector", {}), caller.labels)


def _port_matches(entry: dict, port: int) -> bool:
    if entry.get("protocol", "TCP") != "TCP":
        return False
    if "port" not in entry:
        return True  # every port of the protocol
    first = entry["port"]
    if not isinstance(first, int):
        raise ValueError(f"named port {first!r}: the policies here give numbers")
    return bool(first <= port <= entry.get("endPort", first))


def reaches(policies: list[dict], caller: Pod, target: Pod, port: int) -> bool:
    """Whether ``caller`` may open ``port`` (TCP) on ``target``."""
    chosen = _isolating(policies, target)
    if not chosen:
        return True  # a pod no policy selects accepts everything
    for policy in chosen:
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports")
            if ports and not any(_port_matches(p, port) for p in ports):
                continue
            peers = rule.get("from")
            if not peers or any(
                _peer_admits(peer, policy["metadata"]["namespace"], caller) for peer in peers
            ):
                return True
    return False
