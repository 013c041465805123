"""Every span name, attribute key, event name and enum value ragtrace emits or reads.

The only place that spells attribute names out, split by namespace; this package re-exports them
all, so the shell reads ``names.GEN_AI_REQUEST_MODEL`` whichever module holds it:

* ``gen_ai``: span names, operation names and OpenTelemetry GenAI (``gen_ai.*``);
* ``rag``: ragtrace's own ``rag.*`` namespace (ids, scores, positions, citations, figures);
* ``openinference``: OpenInference (``openinference.*``, ``input.value``, ``retrieval.documents.{i}.*``),
  which Phoenix reads;
* ``metrics``: metric instrument names and labels (``prometheus_names`` maps them to Prometheus's);
* ``foreign``: other instrumentations' attributes that ``ragtrace report`` reads, never emitted;
* ``tables``: the attribute and metric reference tables ``docs/attributes.md`` is rendered from
  (by ``reference``);
* ``ragtrace._internal.core.vocabulary``: the values the pure core computes with (stage names,
  inclusion methods, drop reasons, figure keys, not-measurable reasons), re-exported here.
"""

from ..core.vocabulary import *  # noqa: F403
from .foreign import *  # noqa: F403
from .gen_ai import *  # noqa: F403
from .metrics import *  # noqa: F403
from .openinference import *  # noqa: F403
from .rag import *  # noqa: F403
from .tables import *  # noqa: F403
