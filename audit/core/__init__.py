"""The core every other layer uses: the data model, results and findings, the component
interfaces and their registry, statistics, errors, files and progress. It imports nothing
from the rest of anonaudit."""
