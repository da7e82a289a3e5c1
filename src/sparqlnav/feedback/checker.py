"""The feedback checker: every guideline of the one catalogue with exactly one detector — the general ones
(feedback/eraser.py), the query builder's (feedback/builder.py) and the SQL builder's (feedback/sql.py) — run
over each step of a run."""

from __future__ import annotations

from collections.abc import Mapping

from sparqlnav.feedback.builder import BUILD_DETECTORS
from sparqlnav.feedback.catalogue import Guideline, Stage, load_catalogue
from sparqlnav.feedback.eraser import STEP_DETECTORS, Detector, FeedbackOptions, StepContext
from sparqlnav.feedback.sql import SQL_DETECTORS

DETECTORS: dict[str, Detector] = {**STEP_DETECTORS, **BUILD_DETECTORS, **SQL_DETECTORS}


class Feedback:
    """Run the detectors over a step and return the guidelines that fire, in catalogue order."""

    def __init__(
        self,
        catalogue: Mapping[str, Guideline] | None = None,
        detectors: Mapping[str, Detector] | None = None,
        options: FeedbackOptions | None = None,
    ) -> None:
        self.catalogue = dict(catalogue if catalogue is not None else load_catalogue())
        self.detectors = dict(detectors if detectors is not None else DETECTORS)
        self.options = options or FeedbackOptions()
        unmatched = set(self.catalogue) ^ set(self.detectors)
        if unmatched:
            raise ValueError(
                f"every guideline needs exactly one detector and vice versa: {sorted(unmatched)}"
            )

    def check(self, ctx: StepContext, stage: Stage | None = None) -> list[Guideline]:
        """Guidelines whose trigger fires for this step (only those of `stage` when given)."""
        fired = []
        for gid, guideline in self.catalogue.items():
            if stage is not None and guideline.stage != stage:
                continue
            details = self.detectors[gid](ctx, self.options)
            if details is not None:
                fired.append(guideline.render(details))
        return fired
