"""HTTP layer: dependencies, problem+json errors, schemas, thin route handlers."""
