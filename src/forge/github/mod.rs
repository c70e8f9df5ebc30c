//! The GitHub REST and GraphQL client.
