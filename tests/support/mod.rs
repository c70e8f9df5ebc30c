pub mod engine;
pub mod github_standin;
pub mod pg;
