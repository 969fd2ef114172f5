//! The shapes of the requests served, per version, for [`walk`](super::walk): only what a
//! walk needs (field sizes, strings, byte arrays, arrays), taken from Kafka's message specs.

use kafka_protocol::messages::ApiKey;

use super::walk::{Field, I16, I32, I64, I8, UUID};

fn arr(fields: Vec<Field>) -> Field {
    Field::Array(fields)
}

/// Adds `f` when `on`.
fn when(on: bool, f: Field) -> Option<Field> {
    on.then_some(f)
}

/// The body schema of `api` at `version`, and whether that version is flexible; `None` for an
/// API whose body has no array (nothing for a count to lie about).
pub fn schema(api: ApiKey, v: i16) -> Option<(Vec<Field>, bool)> {
    let fields = data_fields(api, v)
        .or_else(|| admin_fields(api, v))
        .or_else(|| group_fields(api, v))
        .or_else(|| security_fields(api, v))?;
    let flexible = match api {
        ApiKey::Metadata => v >= 9,
        ApiKey::Produce => v >= 9,
        ApiKey::Fetch => v >= 12,
        ApiKey::ListOffsets => v >= 6,
        ApiKey::OffsetForLeaderEpoch => v >= 4,
        ApiKey::DeleteRecords => v >= 2,
        ApiKey::FindCoordinator => v >= 3,
        ApiKey::DescribeConfigs => v >= 4,
        ApiKey::IncrementalAlterConfigs => v >= 1,
        ApiKey::DescribeLogDirs | ApiKey::AlterReplicaLogDirs => v >= 2,
        ApiKey::CreateTopics => v >= 5,
        ApiKey::DeleteTopics => v >= 4,
        ApiKey::AlterPartitionReassignments | ApiKey::ListPartitionReassignments | ApiKey::DescribeQuorum => true,
        ApiKey::AlterConfigs | ApiKey::CreatePartitions | ApiKey::ElectLeaders => v >= 2,
        ApiKey::DescribeClientQuotas | ApiKey::AlterClientQuotas => v >= 1,
        ApiKey::DescribeUserScramCredentials | ApiKey::AlterUserScramCredentials => true,
        ApiKey::CreateAcls | ApiKey::DeleteAcls => v >= 2,
        ApiKey::JoinGroup => v >= 6,
        ApiKey::SyncGroup | ApiKey::LeaveGroup => v >= 4,
        ApiKey::OffsetCommit => v >= 8,
        ApiKey::OffsetFetch => v >= 6,
        ApiKey::ListGroups => v >= 3,
        ApiKey::DescribeGroups => v >= 5,
        ApiKey::DeleteGroups => v >= 2,
        ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe => true,
        _ => false,
    };
    Some((fields.into_iter().flatten().collect(), flexible))
}

/// The data APIs' fields, each present or not at version `v`.
fn data_fields(api: ApiKey, v: i16) -> Option<Vec<Option<Field>>> {
    Some(match api {
        ApiKey::Metadata => vec![
            Some(arr(vec![when(v >= 10, UUID), Some(Field::Str)]
                .into_iter()
                .flatten()
                .collect())),
            when(v >= 4, I8),
            when((8..=10).contains(&v), I8),
            when(v >= 8, I8),
        ],
        ApiKey::Produce => vec![
            Some(Field::Str),
            Some(I16),
            Some(I32),
            Some(arr(vec![Field::Str, arr(vec![I32, Field::Bytes])])),
        ],
        ApiKey::Fetch => vec![
            // The replica id, a tagged field from v15.
            when(v <= 14, I32),
            Some(I32),
            Some(I32),
            Some(I32),
            Some(I8),
            when(v >= 7, I32),
            when(v >= 7, I32),
            Some(arr(vec![
                if v >= 13 { UUID } else { Field::Str },
                arr([
                    Some(I32),
                    when(v >= 9, I32),
                    Some(I64),
                    when(v >= 12, I32),
                    when(v >= 5, I64),
                    Some(I32),
                ]
                .into_iter()
                .flatten()
                .collect()),
            ])),
            when(
                v >= 7,
                arr(vec![if v >= 13 { UUID } else { Field::Str }, Field::Ints(4)]),
            ),
            when(v >= 11, Field::Str),
        ],
        ApiKey::ListOffsets => vec![
            Some(I32),
            when(v >= 2, I8),
            Some(arr(vec![
                Field::Str,
                arr([Some(I32), when(v >= 4, I32), Some(I64)]
                    .into_iter()
                    .flatten()
                    .collect()),
            ])),
            when(v >= 10, I32),
        ],
        ApiKey::OffsetForLeaderEpoch => vec![when(v >= 3, I32), Some(arr(vec![Field::Str, arr(vec![I32, I32, I32])]))],
        ApiKey::DeleteRecords => vec![Some(arr(vec![Field::Str, arr(vec![I32, I64])])), Some(I32)],
        _ => return None,
    })
}

/// The admin APIs' fields, each present or not at version `v`.
fn admin_fields(api: ApiKey, v: i16) -> Option<Vec<Option<Field>>> {
    Some(match api {
        ApiKey::CreateTopics => vec![
            Some(arr(vec![
                Field::Str,
                I32,
                I16,
                arr(vec![I32, Field::Ints(4)]),
                arr(vec![Field::Str, Field::Str]),
            ])),
            Some(I32),
            Some(I8),
        ],
        ApiKey::DeleteTopics => vec![Some(Field::Strs), Some(I32)],
        ApiKey::AlterPartitionReassignments => {
            vec![Some(I32), Some(arr(vec![Field::Str, arr(vec![I32, Field::Ints(4)])]))]
        }
        ApiKey::ListPartitionReassignments => vec![Some(I32), Some(arr(vec![Field::Str, Field::Ints(4)]))],
        ApiKey::DescribeQuorum => vec![Some(arr(vec![Field::Str, arr(vec![I32])]))],
        ApiKey::DescribeConfigs => vec![Some(arr(vec![I8, Field::Str, Field::Strs])), Some(I8), when(v >= 3, I8)],
        ApiKey::IncrementalAlterConfigs => vec![
            Some(arr(vec![I8, Field::Str, arr(vec![Field::Str, I8, Field::Str])])),
            Some(I8),
        ],
        ApiKey::AlterConfigs => vec![
            Some(arr(vec![I8, Field::Str, arr(vec![Field::Str, Field::Str])])),
            Some(I8),
        ],
        ApiKey::CreatePartitions => vec![
            Some(arr(vec![Field::Str, I32, arr(vec![Field::Ints(4)])])),
            Some(I32),
            Some(I8),
        ],
        ApiKey::ElectLeaders => vec![when(v >= 1, I8), Some(arr(vec![Field::Str, Field::Ints(4)])), Some(I32)],
        ApiKey::DescribeLogDirs => vec![Some(arr(vec![Field::Str, Field::Ints(4)]))],
        ApiKey::AlterReplicaLogDirs => vec![Some(arr(vec![Field::Str, arr(vec![Field::Str, Field::Ints(4)])]))],
        ApiKey::FindCoordinator if v >= 4 => vec![Some(I8), Some(Field::Strs)],
        ApiKey::DescribeClientQuotas => vec![Some(arr(vec![Field::Str, I8, Field::Str])), Some(I8)],
        ApiKey::DescribeUserScramCredentials => vec![Some(arr(vec![Field::Str]))],
        ApiKey::AlterClientQuotas => vec![
            Some(arr(vec![
                arr(vec![Field::Str, Field::Str]),
                arr(vec![Field::Str, I64, I8]),
            ])),
            Some(I8),
        ],
        _ => return None,
    })
}

/// The security APIs' fields (SaslHandshake, SaslAuthenticate and DescribeAcls have no array).
fn security_fields(api: ApiKey, v: i16) -> Option<Vec<Option<Field>>> {
    let filter = || {
        [
            Some(I8),
            Some(Field::Str),
            when(v >= 1, I8),
            Some(Field::Str),
            Some(Field::Str),
            Some(I8),
            Some(I8),
        ]
        .into_iter()
        .flatten()
        .collect()
    };
    Some(match api {
        ApiKey::CreateAcls => vec![Some(arr(filter()))],
        ApiKey::DeleteAcls => vec![Some(arr(filter()))],
        ApiKey::AlterUserScramCredentials => vec![
            Some(arr(vec![Field::Str, I8])),
            Some(arr(vec![Field::Str, I8, I32, Field::Bytes, Field::Bytes])),
        ],
        _ => return None,
    })
}

/// The group and offset APIs' fields, each present or not at version `v`.
fn group_fields(api: ApiKey, v: i16) -> Option<Vec<Option<Field>>> {
    let s = Field::Str;
    Some(match api {
        ApiKey::JoinGroup => vec![
            Some(s.clone()),
            Some(I32),
            when(v >= 1, I32),
            Some(s.clone()),
            when(v >= 5, s.clone()),
            Some(s.clone()),
            Some(arr(vec![s.clone(), Field::Bytes])),
            when(v >= 8, s),
        ],
        ApiKey::SyncGroup => vec![
            Some(s.clone()),
            Some(I32),
            Some(s.clone()),
            when(v >= 3, s.clone()),
            when(v >= 5, s.clone()),
            when(v >= 5, s.clone()),
            Some(arr(vec![s, Field::Bytes])),
        ],
        ApiKey::LeaveGroup if v < 3 => vec![Some(s.clone()), Some(s)],
        ApiKey::LeaveGroup => vec![
            Some(s.clone()),
            Some(arr([Some(s.clone()), Some(s.clone()), when(v >= 5, s)]
                .into_iter()
                .flatten()
                .collect())),
        ],
        ApiKey::OffsetCommit => vec![
            Some(s.clone()),
            when(v >= 1, I32),
            when(v >= 1, s.clone()),
            when(v >= 7, s.clone()),
            when((2..=4).contains(&v), I64),
            Some(arr(vec![
                s.clone(),
                arr([Some(I32), Some(I64), when(v >= 6, I32), when(v == 1, I64), Some(s)]
                    .into_iter()
                    .flatten()
                    .collect()),
            ])),
        ],
        ApiKey::OffsetFetch if v < 8 => vec![Some(s.clone()), Some(arr(vec![s, Field::Ints(4)])), when(v >= 7, I8)],
        ApiKey::OffsetFetch => vec![
            Some(arr([
                Some(s.clone()),
                when(v >= 9, s.clone()),
                when(v >= 9, I32),
                Some(arr(vec![s, Field::Ints(4)])),
            ]
            .into_iter()
            .flatten()
            .collect())),
            Some(I8),
        ],
        ApiKey::ListGroups => vec![when(v >= 4, Field::Strs), when(v >= 5, Field::Strs)],
        ApiKey::DescribeGroups => vec![Some(Field::Strs), when(v >= 3, I8)],
        ApiKey::DeleteGroups => vec![Some(Field::Strs)],
        ApiKey::OffsetDelete => vec![Some(s.clone()), Some(arr(vec![s, arr(vec![I32])]))],
        ApiKey::ConsumerGroupHeartbeat => vec![
            Some(s.clone()),
            Some(s.clone()),
            Some(I32),
            Some(s.clone()),
            Some(s.clone()),
            Some(I32),
            Some(Field::Strs),
            when(v >= 1, s.clone()),
            Some(s),
            Some(arr(vec![UUID, Field::Ints(4)])),
        ],
        ApiKey::ConsumerGroupDescribe => vec![Some(Field::Strs), Some(I8)],
        _ => return None,
    })
}
