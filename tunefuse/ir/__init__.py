"""The definition half: the fusion IR a `FusionDefinition` builds (`fusion`), its ops and
types (`ops`, `dtypes`, `elementwise`), shape inference as ops are added (`infer`, `shapes`),
and its forms outside Python objects (`canonical` for ids, `printer`, `serialize`)."""
