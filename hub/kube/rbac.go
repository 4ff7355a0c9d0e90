package kube

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The names kubeadm gives the groups, ClusterRoles and ClusterRoleBindings
// of kubelet TLS bootstrap (k8s.io/kubernetes cmd/kubeadm/app/constants),
// so a cluster set up by kubeadm and one set up by Roost look the same.
const (
	// BootstrapTokenGroup is the extra group bootstrap tokens authenticate
	// in (besides system:bootstrappers), kubeadm's default node token group.
	BootstrapTokenGroup = "system:bootstrappers:kubeadm:default-node-token"
	// NodesGroup is the group of every kubelet's client certificate.
	NodesGroup = "system:nodes"

	// The ClusterRoles: built into kube-apiserver's RBAC bootstrap policy.
	nodeBootstrapperRole   = "system:node-bootstrapper"
	nodeClientApproverRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	selfNodeClientRole     = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"

	// The ClusterRoleBindings kubeadm creates.
	kubeletBootstrapBinding         = "kubeadm:kubelet-bootstrap"
	nodeAutoApproveBootstrapBinding = "kubeadm:node-autoapprove-bootstrap"
	nodeAutoApproveRotationBinding  = "kubeadm:node-autoapprove-certificate-rotation"
)

// bootstrapBindings are the ClusterRoleBindings EnsureBootstrapRBAC keeps.
func bootstrapBindings() []*rbacv1.ClusterRoleBinding {
	b := func(name, role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedByValue}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		// Bootstrap tokens may create CertificateSigningRequests...
		b(kubeletBootstrapBinding, nodeBootstrapperRole, BootstrapTokenGroup),
		// ...which kube-controller-manager's csrapprover approves...
		b(nodeAutoApproveBootstrapBinding, nodeClientApproverRole, BootstrapTokenGroup),
		// ...as it does the renewals kubelets make with their own certificate.
		b(nodeAutoApproveRotationBinding, selfNodeClientRole, NodesGroup),
	}
}

// EnsureBootstrapRBAC creates or repairs the three ClusterRoleBindings
// kubeadm creates so that kubelets holding a bootstrap token can do TLS
// bootstrap and get their client certificates approved, and so that
// kubelets can renew them:
//
//	kubeadm:kubelet-bootstrap                     system:node-bootstrapper → group system:bootstrappers:kubeadm:default-node-token
//	kubeadm:node-autoapprove-bootstrap            …:certificatesigningrequests:nodeclient → same group
//	kubeadm:node-autoapprove-certificate-rotation …:certificatesigningrequests:selfnodeclient → group system:nodes
//
// It is idempotent: a binding that already exists (for example, made by
// kubeadm) is left alone when it grants the role to the group, its subjects
// are replaced when they differ, and it is recreated when it binds another
// role (roleRef is immutable). The first error stops it.
func (c *Client) EnsureBootstrapRBAC(ctx context.Context) error {
	api := c.cs.RbacV1().ClusterRoleBindings()
	for _, want := range bootstrapBindings() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = api.Create(ctx, want, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					// Created meanwhile: compare it on the next round.
					return apierrors.NewConflict(rbacv1.Resource("clusterrolebindings"), want.Name, err)
				}
				return err
			case err != nil:
				return err
			case got.RoleRef != want.RoleRef:
				// roleRef cannot change: delete and create, guarded
				// by the version we compared.
				err := api.Delete(ctx, got.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
					UID: &got.UID, ResourceVersion: &got.ResourceVersion}})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				return apierrors.NewConflict(rbacv1.Resource("clusterrolebindings"), want.Name,
					fmt.Errorf("recreated to bind %s", want.RoleRef.Name))
			case !slices.Equal(got.Subjects, want.Subjects):
				got.Subjects = want.Subjects
				_, err = api.Update(ctx, got, metav1.UpdateOptions{})
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("kube: ensuring ClusterRoleBinding %s: %w", want.Name, err)
		}
	}
	return nil
}
