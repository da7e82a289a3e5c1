"""The build strategy (QueryAgent): a query built step by step with small tools, checked by ERASER feedback."""

from sparqlnav.strategies.builder.strategy import Build, BuildOptions, create, wanted_aggregations
from sparqlnav.strategies.builder.tools import BUILD_TOOLS, BUILDER_TOOLS, Builder

__all__ = ["BUILDER_TOOLS", "BUILD_TOOLS", "Build", "BuildOptions", "Builder", "create", "wanted_aggregations"]
